"""Views: read-only collections defined by a pipeline over a collection or a view.

A view is read as MongoDB reads it: find, aggregate, count and distinct run the view's
pipeline (and the pipelines of the views it reads) in front of the reader's, under the
view's collation; the cursor and its getMores name the view. Writes and index commands
are refused with CommandNotSupportedOnView; definitions are checked when made (cycles,
chains longer than 20, stages that write) and kept in `system.views`, where
listCollections, collMod and drop find them.
"""

from __future__ import annotations

import pytest
from pymongo.collation import Collation

from helpers import ids, raises_code

PEOPLE = [
    {"_id": 1, "name": "ann", "age": 30, "tags": ["a", "b"]},
    {"_id": 2, "name": "bob", "age": 25, "tags": ["b"]},
    {"_id": 3, "name": "Cid", "age": 35, "tags": []},
    {"_id": 4, "name": "dee", "age": 40, "tags": ["c", "a"]},
]


@pytest.fixture
def people(db):
    db.people.insert_many(PEOPLE)
    db.command("create", "adults", viewOn="people", pipeline=[{"$match": {"age": {"$gte": 30}}}])
    return db


def test_find_runs_the_view_pipeline_then_the_query(people):
    view = people.adults
    assert ids(view.find().sort("_id", 1)) == [1, 3, 4]
    assert ids(view.find({"age": {"$lt": 40}}).sort("age", -1)) == [3, 1]
    assert list(view.find({}, {"name": 1, "_id": 0}).sort("_id", 1).skip(1).limit(1)) == [
        {"name": "Cid"}
    ]
    assert view.find_one({"_id": 4})["name"] == "dee"


def test_cursors_of_a_view_name_the_view(people):
    reply = people.command("find", "adults", batchSize=1)
    assert reply["cursor"]["ns"] == f"{people.name}.adults"
    more = people.command("getMore", reply["cursor"]["id"], collection="adults")
    # A getMore without batchSize returns the rest, as mongod does.
    assert ids(more["cursor"]["nextBatch"]) == [3, 4]
    assert more["cursor"]["id"] == 0


def test_aggregate_count_and_distinct(people):
    view = people.adults
    totals = list(view.aggregate([{"$group": {"_id": None, "ages": {"$sum": "$age"}}}]))
    assert totals == [{"_id": None, "ages": 105}]
    assert view.count_documents({}) == 3
    assert people.command("count", "adults", query={"age": 30}) == {"n": 1, "ok": 1.0}
    assert view.distinct("tags") == ["a", "b", "c"]
    assert view.distinct("tags", {"_id": 1}) == ["a", "b"]


def test_views_on_views_compose_their_pipelines(people):
    people.command("create", "names", viewOn="adults", pipeline=[{"$project": {"name": 1}}])
    assert list(people.names.find({"_id": {"$gt": 1}}).sort("_id", 1)) == [
        {"_id": 3, "name": "Cid"},
        {"_id": 4, "name": "dee"},
    ]
    # Changing the inner view changes what the outer one shows.
    people.command("collMod", "adults", pipeline=[{"$match": {"age": {"$lt": 30}}}])
    assert list(people.names.find()) == [{"_id": 2, "name": "bob"}]


def test_lookup_and_union_read_through_a_view(people):
    people.teams.insert_many([{"_id": "x", "member": 1}, {"_id": "y", "member": 2}])
    joined = people.teams.aggregate(
        [
            {
                "$lookup": {
                    "from": "adults",
                    "localField": "member",
                    "foreignField": "_id",
                    "as": "p",
                }
            },
            {"$project": {"n": {"$size": "$p"}}},
            {"$sort": {"_id": 1}},
        ]
    )
    assert list(joined) == [{"_id": "x", "n": 1}, {"_id": "y", "n": 0}]
    union = people.teams.aggregate([{"$unionWith": "adults"}, {"$count": "n"}])
    assert list(union) == [{"n": 5}]


def test_listed_as_views_and_dropped_as_views(people):
    listed = {c["name"]: c for c in people.list_collections()}
    assert listed["adults"]["type"] == "view"
    assert listed["adults"]["options"] == {
        "viewOn": "people",
        "pipeline": [{"$match": {"age": {"$gte": 30}}}],
    }
    assert listed["adults"]["info"] == {"readOnly": True}
    assert listed["system.views"]["type"] == "collection"
    assert people.command("dbStats")["views"] == 1
    people.drop_collection("adults")
    assert "adults" not in people.list_collection_names()
    assert people.people.count_documents({}) == 4


@pytest.mark.parametrize(
    "command",
    [
        {"insert": "adults", "documents": [{"_id": 9}]},
        {"update": "adults", "updates": [{"q": {}, "u": {"$set": {"x": 1}}}]},
        {"delete": "adults", "deletes": [{"q": {}, "limit": 0}]},
        {"findAndModify": "adults", "query": {}, "remove": True},
        {"createIndexes": "adults", "indexes": [{"key": {"age": 1}, "name": "age_1"}]},
        {"listIndexes": "adults"},
        {"collStats": "adults"},
    ],
    ids=lambda c: next(iter(c)),
)
def test_writes_and_index_commands_are_refused(people, command):
    with raises_code("CommandNotSupportedOnView"):
        people.command(command)
    assert people.people.count_documents({}) == 4


def test_out_and_merge_cannot_write_a_view(people):
    with raises_code("CommandNotSupportedOnView"):
        list(people.people.aggregate([{"$out": "adults"}]))
    with raises_code("CommandNotSupportedOnView"):
        list(people.people.aggregate([{"$merge": {"into": "adults"}}]))


def test_definitions_are_checked(people):
    with raises_code("GraphContainsCycle"):
        people.command("create", "loop", viewOn="loop")
    people.command("create", "a1", viewOn="people")
    with raises_code("GraphContainsCycle"):
        people.command("collMod", "a1", viewOn="a1")
    with raises_code("OptionNotSupportedOnView"):
        people.command("create", "w", viewOn="people", pipeline=[{"$out": "x"}])
    with raises_code("Location40324"):
        people.command("create", "w", viewOn="people", pipeline=[{"$nope": {}}])
    with raises_code("InvalidOptions"):
        people.command("create", "w", pipeline=[])
    with raises_code("TypeMismatch"):
        people.command("create", "w", viewOn=1)
    with raises_code("NamespaceExists"):
        people.command("create", "people", viewOn="adults")
    with raises_code("NamespaceExists"):
        people.command("create", "adults")
    # The same definition again is not an error, as for a collection.
    people.command(
        "create", "adults", viewOn="people", pipeline=[{"$match": {"age": {"$gte": 30}}}]
    )


def test_a_chain_of_views_is_at_most_twenty_long(db):
    source = "base"
    for depth in range(1, 21):
        db.command("create", f"v{depth}", viewOn=source)
        source = f"v{depth}"
    with raises_code("ViewDepthLimitExceeded"):
        db.command("create", "v21", viewOn="v20")
    db.base.insert_one({"_id": 1})
    assert ids(db.v20.find()) == [1]


def test_sub_pipelines_nest_at_most_twenty_deep(db):
    def nested(depth):
        pipeline = [{"$match": {}}]
        for _ in range(depth):
            pipeline = [{"$lookup": {"from": "c", "pipeline": pipeline, "as": "x"}}]
        return pipeline

    db.command("create", "ok", viewOn="c", pipeline=nested(20))
    with raises_code("Location232"):
        db.command("create", "deep", viewOn="c", pipeline=nested(21))


def test_the_view_collation_governs_its_reads(db):
    db.words.insert_many([{"_id": 1, "w": "apple"}, {"_id": 2, "w": "Apple"}, {"_id": 3, "w": "b"}])
    db.command("create", "ci", viewOn="words", collation={"locale": "en", "strength": 2})
    assert ids(db.ci.find({"w": "APPLE"}).sort("_id", 1)) == [1, 2]
    with raises_code("OptionNotSupportedOnView"):
        list(db.ci.find({}, collation=Collation(locale="fr")))
    # A stage that reads the view must run under the view's collation too.
    with raises_code("OptionNotSupportedOnView"):
        list(db.words.aggregate([{"$unionWith": "ci"}]))


def test_find_options_without_an_aggregation_counterpart(people):
    with raises_code("InvalidPipelineOperator"):
        people.command("find", "adults", showRecordId=True)
    with raises_code("InvalidPipelineOperator"):
        people.command("find", "adults", sort={"$natural": -1})


def test_explain_of_a_view_read_explains_the_aggregation(people):
    plan = people.command("explain", {"find": "adults", "filter": {"age": 40}})
    assert plan["command"]["aggregate"] == "people"
    assert plan["command"]["pipeline"] == [
        {"$match": {"age": {"$gte": 30}}},
        {"$match": {"age": 40}},
    ]
