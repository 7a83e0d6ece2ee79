"""The plan cache and index filters: `planCacheSetFilter`/`ListFilters`/`ClearFilters`
restrict the indexes of one query shape (over any hint), `planCacheClear` forgets cached
choices, and `$planCacheStats` lists them, as MongoDB does.
"""

from __future__ import annotations

import pytest

from helpers import raises_code


@pytest.fixture
def indexed(coll):
    coll.insert_many([{"a": i % 10, "b": i % 7, "c": i} for i in range(100)])
    coll.create_index([("a", 1), ("b", 1)])
    coll.create_index([("a", 1), ("c", 1)])
    return coll


def winning_index(db, command):
    planner = db.command("explain", command, verbosity="queryPlanner")["queryPlanner"]
    stage = planner["winningPlan"]
    while "inputStage" in stage:
        stage = stage["inputStage"]
    return planner["indexFilterSet"], stage.get("indexName")


def test_an_index_filter_decides_the_index_of_its_shape(db, indexed):
    assert winning_index(db, {"find": "c", "filter": {"a": 1}}) == (False, "a_1_b_1")
    db.command("planCacheSetFilter", "c", query={"a": 5}, indexes=[{"a": 1, "c": 1}])
    # Any value of the same shape, whatever the hint.
    assert winning_index(db, {"find": "c", "filter": {"a": 2}}) == (True, "a_1_c_1")
    hinted = {"find": "c", "filter": {"a": 2}, "hint": "a_1_b_1"}
    assert winning_index(db, hinted) == (True, "a_1_c_1")
    assert winning_index(db, {"count": "c", "query": {"a": 3}}) == (True, "a_1_c_1")
    # Another shape is not filtered.
    assert winning_index(db, {"find": "c", "filter": {"a": 2, "b": 1}})[0] is False
    assert indexed.count_documents({"a": 2}) == 10
    filters = db.command("planCacheListFilters", "c")["filters"]
    assert filters == [
        {"query": {"a": 5}, "sort": {}, "projection": {}, "indexes": [{"a": 1, "c": 1}]}
    ]
    db.command("planCacheClearFilters", "c", query={"a": 9})
    assert db.command("planCacheListFilters", "c")["filters"] == []
    assert winning_index(db, {"find": "c", "filter": {"a": 2}}) == (False, "a_1_b_1")


def test_a_filter_naming_no_index_scans_the_collection(db, indexed):
    db.command("planCacheSetFilter", "c", query={"a": 1}, indexes=["no_such_index"])
    filtered, index = winning_index(db, {"find": "c", "filter": {"a": 1}})
    assert (filtered, index) == (True, None)


def test_plan_cache_stats_lists_choices_until_cleared(db, indexed):
    assert list(indexed.aggregate([{"$planCacheStats": {}}])) == []
    list(indexed.find({"a": 5, "b": 1}))
    entries = list(indexed.aggregate([{"$planCacheStats": {}}]))
    assert len(entries) == 1
    assert entries[0]["createdFromQuery"]["query"] == {"a": 5, "b": 1}
    assert entries[0]["cachedPlan"]["inputStage"]["indexName"] == "a_1_b_1"
    # The entry names the shape explain reports for a query of it.
    explained = db.command("explain", {"find": "c", "filter": {"b": 7, "a": 9}})
    shape = explained["queryPlanner"]["planCacheShapeHash"]
    assert entries[0]["planCacheShapeHash"] == entries[0]["queryHash"] == shape
    db.command("planCacheClear", "c")
    assert list(indexed.aggregate([{"$planCacheStats": {}}])) == []


def test_plan_cache_errors(db, indexed):
    with raises_code("BadValue"):
        db.command("planCacheSetFilter", "missing", query={}, indexes=[{"a": 1}])
    with raises_code("BadValue"):
        db.command("planCacheSetFilter", "c", query={}, indexes=[])
    with raises_code("InvalidNamespace"):
        db.command("planCacheListFilters", 1)
    db.command("create", "v", viewOn="c", pipeline=[])
    with raises_code("CommandNotSupportedOnView"):
        db.command("planCacheClear", "v")
    with raises_code("Location40602"):
        list(indexed.aggregate([{"$match": {}}, {"$planCacheStats": {}}]))
    with raises_code("InvalidOptions"):
        db.command(
            "aggregate",
            "c",
            pipeline=[{"$planCacheStats": {}}],
            cursor={},
            readConcern={"level": "majority"},
        )
