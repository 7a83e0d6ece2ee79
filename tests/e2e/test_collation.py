"""Collations: the `collation` option of queries, sorts, aggregations and writes.

Under a collation strings compare by a locale's rules: at strength 2 "PING" equals
"ping" but not "péng", `numericOrdering` puts "10" after "9". Everything else compares
as without one: numbers, field names, and regexes, which still match bytes. An invalid
collation document gets MongoDB's error, whichever command carries it.
"""

from __future__ import annotations

import pytest
from pymongo import ASCENDING, DeleteMany, UpdateOne
from pymongo.collation import Collation, CollationStrength
from pymongo.errors import OperationFailure

from helpers import ids, raises_code

CASE_INSENSITIVE = Collation(locale="en_US", strength=CollationStrength.SECONDARY)

DOCS = [
    {"_id": 1, "x": "ping"},
    {"_id": 2, "x": "PING"},
    {"_id": 3, "x": "péng"},
    {"_id": 4, "x": "pong"},
    {"_id": 5, "x": 10},
    {"_id": 6, "x": ["Ping", "zzz"]},
    {"_id": 7, "x": {"y": "PiNg"}},
]


@pytest.fixture
def docs(coll):
    coll.insert_many(DOCS)
    return coll


QUERIES = {
    "equality": ({"x": "PING"}, [1, 2, 6]),
    "$in": ({"x": {"$in": ["PING", 10]}}, [1, 2, 5, 6]),
    "$nin": ({"x": {"$nin": ["PING", 10]}}, [3, 4, 7]),
    "$ne": ({"x": {"$ne": "ping"}}, [3, 4, 5, 7]),
    "range": ({"x": {"$gt": "PIN", "$lt": "PINGS"}}, [1, 2, 6]),
    "embedded document": ({"x": {"y": "ping"}}, [7]),
    "$elemMatch": ({"x": {"$elemMatch": {"$eq": "PING"}}}, [6]),
    "regex is not collated": ({"x": {"$regex": "^P"}}, [2, 6]),
}


@pytest.mark.parametrize("filter_, expected", QUERIES.values(), ids=QUERIES.keys())
def test_find_and_count_under_collation(docs, filter_, expected):
    assert ids(docs.find(filter_, collation=CASE_INSENSITIVE).sort("_id", 1)) == expected
    assert docs.count_documents(filter_, collation=CASE_INSENSITIVE) == len(expected)


def test_without_collation_comparison_is_binary(docs):
    assert ids(docs.find({"x": "PING"}).sort("_id", 1)) == [2]
    assert ids(docs.find({"x": "PING"}, collation=Collation(locale="simple"))) == [2]


def test_sort_under_collation(coll):
    coll.insert_many(
        [
            {"_id": 1, "s": "b"},
            {"_id": 2, "s": "B"},
            {"_id": 3, "s": "a"},
            {"_id": 4, "s": "10"},
            {"_id": 5, "s": "9"},
        ]
    )
    assert ids(coll.find().sort("s", ASCENDING)) == [4, 5, 2, 3, 1]
    numeric = Collation(locale="en", numericOrdering=True)
    assert ids(coll.find(collation=numeric).sort("s", ASCENDING)) == [5, 4, 3, 1, 2]
    upper_first = Collation(locale="en", caseFirst="upper")
    assert ids(coll.find(collation=upper_first).sort("s", ASCENDING)) == [4, 5, 3, 2, 1]


def test_locale_rules(coll):
    coll.insert_many([{"_id": 1, "s": "å"}, {"_id": 2, "s": "z"}, {"_id": 3, "s": "a"}])
    assert ids(coll.find(collation=Collation(locale="en")).sort("s", 1)) == [3, 1, 2]
    # Danish sorts å after z.
    assert ids(coll.find(collation=Collation(locale="da")).sort("s", 1)) == [3, 2, 1]


def test_distinct_under_collation(docs):
    values = docs.distinct("x", {"_id": {"$lte": 4}}, collation=CASE_INSENSITIVE)
    # "ping" and "PING" are one value; the first one seen stands for both.
    assert values == ["péng", "ping", "pong"]
    assert len(docs.distinct("x", {"_id": {"$lte": 4}})) == 4


def test_aggregate_match_and_sort_under_collation(docs):
    pipeline = [{"$match": {"x": "PING"}}, {"$sort": {"_id": -1}}]
    assert ids(docs.aggregate(pipeline, collation=CASE_INSENSITIVE)) == [6, 2, 1]


def test_writes_under_collation(docs):
    result = docs.update_many({"x": "PING"}, {"$set": {"hit": True}}, collation=CASE_INSENSITIVE)
    assert result.matched_count == 3
    assert docs.delete_one({"x": "PONG"}, collation=CASE_INSENSITIVE).deleted_count == 1
    before = docs.find_one_and_update(
        {"x": "PÉNG"}, {"$set": {"x": "p"}}, collation=CASE_INSENSITIVE
    )
    assert before["_id"] == 3
    bulk = docs.bulk_write(
        [
            UpdateOne({"x": "PING"}, {"$set": {"n": 1}}, collation=CASE_INSENSITIVE),
            DeleteMany({"x": "PING"}, collation=CASE_INSENSITIVE),
        ]
    )
    assert (bulk.modified_count, bulk.deleted_count) == (1, 3)
    assert ids(docs.find().sort("_id", 1)) == [3, 5, 7]


def _error(coll, collation) -> OperationFailure:
    with pytest.raises(OperationFailure) as info:
        list(coll.find({}, collation=collation))
    return info.value


def test_invalid_collations(coll):
    coll.insert_one({"x": 1})
    error = _error(coll, {"strength": 2})
    assert error.code == 40414
    assert "'collation.locale' is missing" in str(error)
    with raises_code("BadValue") as info:
        list(coll.find({}, collation={"locale": "xx_YY"}))
    assert "Field 'locale' is invalid in:" in str(info.value)
    with raises_code("BadValue"):
        list(coll.find({}, collation={"locale": "en", "strength": 0}))
    assert _error(coll, {"locale": "en", "strength": 6}).code == 2
    with raises_code("TypeMismatch"):
        list(coll.find({}, collation={"locale": "en", "caseLevel": "yes"}))
    with raises_code("BadValue"):
        list(coll.find({}, collation={"locale": "en", "caseFirst": "sideways"}))
    with raises_code("BadValue"):
        list(coll.find({}, collation={"locale": "en", "strength": 1, "backwards": True}))
    assert _error(coll, {"locale": "en", "colour": "red"}).code == 40415
    assert _error(coll, {"locale": "en", "version": "1.0"}).code == 161


def test_commands_run_under_the_collection_default_collation(db):
    """A collection created with a collation gives it to every command that has none
    of its own (queries, sorts, aggregations, counts, distinct, each write statement);
    `{locale: "simple"}` opts out. An index made without a collation takes the same
    default, so the defaulted query uses it."""
    coll = db.create_collection("c", collation=CASE_INSENSITIVE)
    coll.create_index("x")
    coll.insert_many(DOCS)
    assert sorted(ids(coll.find({"x": "ping"}))) == [1, 2, 6]
    assert ids(coll.find({"x": "ping"}, collation=Collation(locale="simple"))) == [1]
    assert coll.count_documents({"x": "PING"}) == 3
    assert len(coll.distinct("x", {"x": {"$in": ["ping", "pong"]}})) == 3
    assert sorted(ids(coll.aggregate([{"$match": {"x": "Ping"}}]))) == [1, 2, 6]
    explained = db.command("explain", {"find": "c", "filter": {"x": "PiNg"}})
    assert explained["executionStats"]["nReturned"] == 3
    assert "IXSCAN" in str(explained["queryPlanner"]["winningPlan"])
    result = db.command(
        "update",
        "c",
        updates=[
            {"q": {"x": "PING"}, "u": {"$set": {"seen": 1}}, "multi": True},
            {
                "q": {"x": "PONG"},
                "u": {"$set": {"seen": 2}},
                "multi": True,
                "collation": {"locale": "simple"},
            },
        ],
    )
    assert result["nModified"] == 3
    assert coll.find_one_and_update({"x": "POng"}, {"$set": {"seen": 3}})["_id"] == 4
    assert coll.delete_many({"x": "PING"}).deleted_count == 3
    assert sorted(ids(coll.find())) == [3, 4, 5, 7]


def test_group_keys_and_expression_comparisons_under_collation(db, coll):
    """Under a collation (the command's or the collection's default), `$group` puts
    strings it finds equal in one group, named by the first value seen, and `$eq`, `$cmp`,
    `$in` and `$indexOfArray` compare strings by it, in `$expr` filters and in stages."""
    docs = [{"_id": 1, "x": "ping"}, {"_id": 2, "x": "PING"}, {"_id": 3, "x": "pong"}]
    docs += [{"_id": 4, "x": "Ping"}]
    coll.insert_many(docs)
    group = [{"$group": {"_id": "$x", "n": {"$sum": 1}}}, {"$sort": {"n": -1}}]
    out = list(coll.aggregate(group, collation=CASE_INSENSITIVE))
    assert [(d["_id"], d["n"]) for d in out] == [("ping", 3), ("pong", 1)]
    assert sorted(d["n"] for d in coll.aggregate(group)) == [1, 1, 1, 1]
    match = {"$expr": {"$eq": ["$x", "PING"]}}
    assert sorted(ids(coll.find(match, collation=CASE_INSENSITIVE))) == [1, 2, 4]
    assert ids(coll.find(match)) == [2]
    stages = [
        {
            "$project": {
                "in": {"$in": ["$x", ["PONG"]]},
                "at": {"$indexOfArray": [["PONG"], "$x"]},
                "cmp": {"$cmp": ["$x", "PING"]},
            }
        },
        {"$sort": {"_id": 1}},
    ]
    out = list(coll.aggregate(stages, collation=CASE_INSENSITIVE))
    assert [d["in"] for d in out] == [False, False, True, False]
    assert [d["at"] for d in out] == [-1, -1, 0, -1]
    assert [d["cmp"] for d in out] == [0, 0, 1, 0]
    defaulted = db.create_collection("ci", collation=CASE_INSENSITIVE)
    defaulted.insert_many(docs)
    assert len(list(defaulted.aggregate(group))) == 2


def test_lookup_equality_under_collation(db):
    db.orders.insert_many([{"_id": 1, "item": "ABC"}, {"_id": 2, "item": "xyz"}])
    db.stock.insert_many(
        [{"_id": 10, "sku": "abc"}, {"_id": 11, "sku": "Abc"}, {"_id": 12, "sku": "q"}]
    )
    lookup = [
        {"$lookup": {"from": "stock", "localField": "item", "foreignField": "sku", "as": "s"}},
        {"$project": {"s": "$s._id"}},
        {"$sort": {"_id": 1}},
    ]
    assert [d["s"] for d in db.orders.aggregate(lookup, collation=CASE_INSENSITIVE)] == [
        [10, 11],
        [],
    ]
    assert [d["s"] for d in db.orders.aggregate(lookup)] == [[], []]
    graph = [
        {
            "$graphLookup": {
                "from": "stock",
                "startWith": "$item",
                "connectFromField": "sku",
                "connectToField": "sku",
                "as": "s",
            }
        },
        {"$project": {"s": {"$sortArray": {"input": "$s._id", "sortBy": 1}}}},
        {"$sort": {"_id": 1}},
    ]
    assert [d["s"] for d in db.orders.aggregate(graph, collation=CASE_INSENSITIVE)] == [
        [10, 11],
        [],
    ]
