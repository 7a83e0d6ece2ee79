"""MongoDB 8.0's query shapes and what hangs on them: explain's `queryShapeHash` and
`planCacheShapeHash`, query settings (`setQuerySettings`, `removeQuerySettings`,
`$querySettings`) that reject a shape or restrict its indexes, and the cluster
parameters (`setClusterParameter`, `getClusterParameter`) they are kept beside.
"""

from __future__ import annotations

import pytest
from bson import Int64, Timestamp
from pymongo.errors import OperationFailure

from helpers import raises_code


def explain(db, command):
    return db.command({"explain": command, "verbosity": "queryPlanner"})


def winning_index(reply) -> str | None:
    stage = reply["queryPlanner"]["winningPlan"]
    while "inputStage" in stage:
        if stage["stage"] == "IXSCAN":
            break
        stage = stage["inputStage"]
    return stage.get("indexName")


def test_explain_reports_both_shape_hashes(db, coll):
    coll.insert_many([{"_id": i, "a": i, "b": i} for i in range(5)])

    def hashes(filter_, **options):
        reply = explain(db, {"find": coll.name, "filter": filter_, **options})
        return reply["queryShapeHash"], reply["queryPlanner"]["planCacheShapeHash"]

    shape, plan = hashes({"a": 1, "b": 2})
    assert len(shape) == 64 and len(plan) == 8
    # Values are not part of either shape.
    assert hashes({"a": 7, "b": 9}) == (shape, plan)
    # The order of the terms: part of the query shape, not of the plan cache shape.
    reordered = hashes({"b": 2, "a": 1})
    assert reordered[0] != shape and reordered[1] == plan
    # A sort is part of both.
    sorted_ = hashes({"a": 1, "b": 2}, sort={"a": 1})
    assert sorted_[0] != shape and sorted_[1] != plan
    # In a pipeline, stages after the match count for the query shape; only those the
    # plan depends on count for the plan cache shape.
    pipeline = [{"$match": {"a": {"$gt": 0}}}]
    base = explain(db, {"aggregate": coll.name, "pipeline": pipeline, "cursor": {}})
    limited = explain(
        db, {"aggregate": coll.name, "pipeline": [*pipeline, {"$limit": 2}], "cursor": {}}
    )
    assert base["queryShapeHash"] != limited["queryShapeHash"]


def test_query_settings_reject_and_restrict_a_shape(client, db, coll):
    coll.insert_many([{"_id": i, "a": i % 3, "b": i % 5} for i in range(30)])
    coll.create_index("a")
    coll.create_index("b")
    query = {"find": coll.name, "filter": {"a": 1, "b": 2}, "$db": db.name}
    reply = client.admin.command(
        {
            "setQuerySettings": query,
            "settings": {
                "indexHints": [
                    {"ns": {"db": db.name, "coll": coll.name}, "allowedIndexes": ["b_1"]}
                ]
            },
        }
    )
    shape = reply["queryShapeHash"]
    explained = explain(db, {"find": coll.name, "filter": {"a": 2, "b": 4}})
    assert explained["queryShapeHash"] == shape
    assert winning_index(explained) == "b_1"
    assert coll.count_documents({"a": 2, "b": 4}) == len(list(coll.find({"a": 2, "b": 4})))
    listed = list(client.admin.aggregate([{"$querySettings": {"showDebugQueryShape": True}}]))
    assert [entry["queryShapeHash"] for entry in listed] == [shape]
    assert listed[0]["representativeQuery"] == query
    assert listed[0]["debugQueryShape"]["filter"] == {
        "$and": [{"a": {"$eq": "?number"}}, {"b": {"$eq": "?number"}}]
    }
    # By its hash, the shape's settings change: the other fields stay.
    client.admin.command({"setQuerySettings": shape, "settings": {"reject": True}})
    with raises_code("QueryRejectedBySettings"):
        list(coll.find({"a": 0, "b": 0}))
    # Another shape is not affected.
    assert len(list(coll.find({"b": 0, "a": 0}))) == 2
    settings = next(iter(client.admin.aggregate([{"$querySettings": {}}])))["settings"]
    assert settings["reject"] is True and settings["indexHints"][0]["allowedIndexes"] == ["b_1"]
    client.admin.command({"removeQuerySettings": query})
    assert len(list(coll.find({"a": 0, "b": 0}))) == 2
    assert list(client.admin.aggregate([{"$querySettings": {}}])) == []


@pytest.mark.parametrize(
    "command, code",
    [
        ({"setQuerySettings": {"find": "c", "filter": {}}, "settings": {"reject": True}}, 40414),
        ({"setQuerySettings": {"count": "c", "$db": "d"}, "settings": {"reject": True}}, 7746402),
        (
            {"setQuerySettings": {"find": "c", "$db": "local"}, "settings": {"reject": True}},
            8584900,
        ),
        ({"setQuerySettings": {"find": "c", "$db": "d"}, "settings": {}}, 8727502),
        ({"setQuerySettings": {"find": "c", "$db": "d"}, "settings": {"reject": False}}, 7746604),
        ({"setQuerySettings": "ABC", "settings": {"reject": True}}, 2),
        ({"setQuerySettings": "A" * 64, "settings": {"reject": True}}, 2),
        ({"setQuerySettings": 1, "settings": {"reject": True}}, 14),
        ({"removeQuerySettings": "ABC"}, 16),
    ],
)
def test_query_settings_errors(client, command, code):
    with pytest.raises(OperationFailure) as refused:
        client.admin.command(command)
    assert refused.value.code == code


def test_query_settings_are_shared_by_a_set_and_survive_restarts(one_member_set):
    client = one_member_set.client()
    query = {"find": "c", "filter": {"x": 1}, "$db": "qs"}
    client.qs.c.insert_one({"x": 1})
    client.admin.command({"setQuerySettings": query, "settings": {"reject": True}})
    with raises_code("QueryRejectedBySettings"):
        list(client.qs.c.find({"x": 5}))
    member = one_member_set.members[0]
    member.restart()
    one_member_set.wait_for_primary()
    client = one_member_set.client()
    with raises_code("QueryRejectedBySettings"):
        list(client.qs.c.find({"x": 5}))


def test_cluster_parameters(client):
    admin = client.admin
    default = admin.command({"getClusterParameter": "changeStreamOptions"})
    entry = default["clusterParameters"][0]
    assert entry["_id"] == "changeStreamOptions"
    assert entry["preAndPostImages"] == {"expireAfterSeconds": "off"}
    assert entry["clusterParameterTime"] == Timestamp(0, 0)
    every = admin.command({"getClusterParameter": "*"})["clusterParameters"]
    assert {"changeStreamOptions", "defaultMaxTimeMS"} <= {p["_id"] for p in every}
    value = {"preAndPostImages": {"expireAfterSeconds": 7200}}
    admin.command({"setClusterParameter": {"changeStreamOptions": value}})
    entry = admin.command({"getClusterParameter": ["changeStreamOptions"]})["clusterParameters"][0]
    assert entry["preAndPostImages"] == {"expireAfterSeconds": Int64(7200)}
    assert entry["clusterParameterTime"] > Timestamp(0, 0)
    # A field left out takes its default again.
    admin.command({"setClusterParameter": {"pauseMigrationsDuringMultiUpdates": {}}})
    entry = admin.command({"getClusterParameter": "pauseMigrationsDuringMultiUpdates"})
    assert entry["clusterParameters"][0]["enabled"] is False
    admin.command(
        {
            "setClusterParameter": {
                "changeStreamOptions": {"preAndPostImages": {"expireAfterSeconds": "off"}}
            }
        }
    )


@pytest.mark.parametrize(
    "command, code",
    [
        ({"getClusterParameter": "unknown"}, 4),
        ({"getClusterParameter": []}, 2),
        ({"getClusterParameter": 1}, 14),
        ({"setClusterParameter": {}}, 4),
        ({"setClusterParameter": {"changeStreams": {}, "changeStreamOptions": {}}}, 72),
        ({"setClusterParameter": {"changeStreamOptions": "x"}}, 2),
        ({"setClusterParameter": {"changeStreams": {"expireAfterSeconds": 0}}}, 2),
        ({"setClusterParameter": {"changeStreams": {"expireAfterSeconds": "x"}}}, 14),
        ({"setClusterParameter": {"changeStreamOptions": {"$x": 1}}}, 52),
    ],
)
def test_cluster_parameter_errors(client, command, code):
    with pytest.raises(OperationFailure) as refused:
        client.admin.command(command)
    assert refused.value.code == code
