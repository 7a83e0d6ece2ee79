"""Indexes and the query planner through pymongo: the planner's index scans must return
exactly what a collection scan returns (ranges, compound and descending keys, $in,
null, multikey arrays, sparse indexes, collations, cursors resumed across batches),
`hint` picks or refuses an index, and `explain` shows the plan in MongoDB's shape.

Explain output for a set of queries is pinned in tests/golden/explain/ (volatile fields
stripped); `UPDATE_GOLDEN=1` rewrites those files.
"""

from __future__ import annotations

import datetime
import json
import os
import pathlib
import random
import threading
import time

import pytest
from bson import json_util
from pymongo.errors import DuplicateKeyError, OperationFailure

from basalt_server import BasaltServer
from helpers import raises_code

GOLDEN_DIR = pathlib.Path(__file__).resolve().parents[1] / "golden" / "explain"


def _docs():
    rng = random.Random(7)
    docs = []
    for i in range(300):
        d = {"_id": i, "a": rng.randrange(10), "b": rng.randrange(20), "s": rng.choice("xyzXYZ")}
        if i % 7 == 0:
            d["a"] = None
        if i % 11 == 0:
            del d["b"]
        if i % 13 == 0:
            d["tags"] = [rng.randrange(5) for _ in range(3)]
        else:
            d["tags"] = rng.randrange(5)
        docs.append(d)
    return docs


QUERIES = [
    {"a": 3},
    {"a": {"$gt": 2, "$lte": 6}},
    {"a": {"$in": [1, 5, 9]}, "b": {"$gte": 10}},
    {"a": 4, "b": {"$lt": 5}},
    {"b": 7, "a": {"$gte": 2}},
    {"a": None},
    {"b": {"$exists": False}},
    {"a": {"$gte": 5}, "b": {"$in": [1, 2, 3]}},
    {"tags": {"$gt": 1, "$lt": 3}},
    {"tags": 2},
    {"tags": {"$in": [0, 4]}},
    {"$and": [{"a": {"$lt": 8}}, {"a": {"$gt": 1}}]},
    {"a": {"$gt": 100}},
    {"a": {"$gt": 5, "$lt": 2}},
    {"s": "x"},
    {"$or": [{"a": 3}, {"b": {"$gt": 15}}]},
    {"$or": [{"a": {"$in": [1, 2]}}, {"a": 2, "b": 3}], "s": "y"},
    {"$or": [{"a": 3}, {"s": "x"}, {"zz": 1}]},
]


@pytest.fixture
def indexed(db):
    db["plain"].insert_many(_docs())
    coll = db["c"]
    coll.insert_many(_docs())
    coll.create_index([("a", 1)])
    coll.create_index([("a", 1), ("b", -1)])
    coll.create_index([("b", 1), ("a", 1)])
    coll.create_index([("tags", 1)])
    coll.create_index([("s", 1)])
    return coll


def _ids(cursor):
    return sorted(d["_id"] for d in cursor)


@pytest.mark.parametrize("query", QUERIES, ids=[json.dumps(q, default=str) for q in QUERIES])
def test_index_scans_return_what_a_collection_scan_returns(indexed, db, query):
    assert _ids(indexed.find(query)) == _ids(db["plain"].find(query))
    assert indexed.count_documents(query) == db["plain"].count_documents(query)


def test_every_index_answers_like_a_scan_when_hinted(indexed, db):
    for index in ["a_1", "a_1_b_-1", "b_1_a_1", "tags_1"]:
        for query in QUERIES:
            got = _ids(indexed.find(query).hint(index))
            assert got == _ids(db["plain"].find(query)), (index, query)


def test_multikey_documents_come_back_once_across_batches(coll):
    coll.create_index("tags")
    coll.insert_many([{"_id": i, "tags": [1, 2, 3, i % 4]} for i in range(250)])
    got = [d["_id"] for d in coll.find({"tags": {"$gte": 1}}).batch_size(7)]
    assert sorted(got) == list(range(250))


def test_index_scan_cursor_resumes_after_documents_move(coll):
    coll.create_index("n")
    coll.insert_many([{"_id": i, "n": i} for i in range(50)])
    cursor = coll.find({"n": {"$gte": 0}}).batch_size(10)
    first = [next(cursor)["_id"] for _ in range(10)]
    coll.delete_many({"n": {"$lt": 20}})
    rest = [d["_id"] for d in cursor]
    assert first == list(range(10))
    assert rest == list(range(20, 50))


def test_dates_range_on_compound_index(coll):
    start = datetime.datetime(2024, 1, 1)
    docs = [
        {"st": st, "ts": start + datetime.timedelta(hours=12 * t), "v": t}
        for st in range(20)
        for t in range(60)
    ]
    coll.insert_many(docs)
    coll.create_index([("ts", 1), ("st", 1)])
    lo, hi = start + datetime.timedelta(days=5), start + datetime.timedelta(days=20)
    query = {"st": 7, "ts": {"$gte": lo, "$lt": hi}}
    got = list(coll.find(query))
    assert sorted(d["v"] for d in got) == list(range(10, 40))
    stats = coll.find(query).explain()["executionStats"]
    # Skips over the other stations instead of reading every key in the range.
    assert stats["totalDocsExamined"] == 30
    assert stats["totalKeysExamined"] < 100
    assert coll.count_documents({"ts": lo}) == 20


def test_sparse_index_is_not_used_for_null(coll):
    coll.create_index("x", sparse=True)
    coll.insert_many([{"_id": 1, "x": 1}, {"_id": 2}, {"_id": 3, "x": None}])
    assert _ids(coll.find({"x": None})) == [2, 3]
    plan = coll.find({"x": None}).explain()["queryPlanner"]["winningPlan"]
    assert plan["stage"] == "COLLSCAN"
    assert _ids(coll.find({"x": 1})) == [1]


def test_collation_queries_do_not_use_binary_string_bounds(coll):
    coll.create_index("s")
    coll.insert_many([{"_id": 1, "s": "abc"}, {"_id": 2, "s": "ABC"}])
    got = _ids(coll.find({"s": "abc"}, collation={"locale": "en", "strength": 2}))
    assert got == [1, 2]


def test_unique_index_is_preferred_for_points(coll):
    coll.create_index("a")
    coll.create_index([("a", 1), ("b", 1)], unique=True)
    coll.insert_many([{"a": i % 3, "b": i} for i in range(30)])
    plan = coll.find({"a": 1, "b": 4}).explain()["queryPlanner"]
    assert plan["winningPlan"]["inputStage"]["indexName"] == "a_1_b_1"
    assert [p["inputStage"]["indexName"] for p in plan["rejectedPlans"]] == ["a_1"]


def test_hint_by_name_key_and_natural(coll):
    coll.create_index("a")
    coll.insert_many([{"a": i} for i in range(10)])
    by_key = coll.find({"a": 3}).hint([("a", 1)]).explain()["queryPlanner"]["winningPlan"]
    assert by_key["inputStage"]["indexName"] == "a_1"
    natural = coll.find({"a": 3}).hint([("$natural", 1)]).explain()
    assert natural["queryPlanner"]["winningPlan"]["stage"] == "COLLSCAN"
    assert len(list(coll.find({"a": 3}).hint("a_1"))) == 1


def test_min_and_max_bound_a_scan_of_the_hinted_index(coll):
    """min (inclusive) and max (exclusive) are whole keys of the hinted index, in its
    order (descending fields reversed), blind to types; MongoDB's errors otherwise."""
    coll.create_index([("a", 1), ("b", -1)])
    coll.insert_many([{"a": a, "b": b} for a in (1, 2) for b in (1, 2)])
    hint = [("a", 1), ("b", -1)]

    def ab(cursor):
        return [(d["a"], d["b"]) for d in cursor]

    # Index order: (1, 2), (1, 1), (2, 2), (2, 1).
    assert ab(coll.find().hint(hint).min(list({"a": 1, "b": 1}.items()))) == [
        (1, 1),
        (2, 2),
        (2, 1),
    ]
    assert ab(coll.find().hint(hint).max(list({"a": 2, "b": 2}.items()))) == [(1, 2), (1, 1)]
    assert ab(
        coll.find({"b": 2})
        .hint(hint)
        .min(list({"a": 1, "b": 2}.items()))
        .max(list({"a": 2, "b": 1}.items()))
    ) == [
        (1, 2),
        (2, 2),
    ]
    explained = coll.find().hint(hint).min(list({"a": 2, "b": 2}.items())).explain()["queryPlanner"]
    assert explained["winningPlan"]["inputStage"]["indexName"] == "a_1_b_-1"

    with raises_code("Location51173"):  # (pymongo checks this itself: sent as a command)
        coll.database.command("find", coll.name, min={"a": 1, "b": 1})
    with raises_code("Location51174"):
        list(coll.find().hint(hint).min(list({"a": 1}.items())))
    with raises_code("Location51176"):
        list(coll.find().hint(hint).min(list({"a": 1, "b": 1}.items())).max(list({"a": 2}.items())))
    with raises_code("Location51175"):
        list(
            coll.find()
            .hint(hint)
            .min(list({"a": 2, "b": 1}.items()))
            .max(list({"a": 1, "b": 1}.items()))
        )
    with raises_code("NoQueryExecutionPlans"):
        list(coll.find().hint([("$natural", 1)]).min(list({"a": 1, "b": 1}.items())))


def test_min_max_ranges_of_id_cover_every_type(coll):
    """Ranges of _id cut at any keys cover every document once, whatever its _id's type:
    how a reader splits a collection into partitions."""
    ids = [1, 2.5, "a", "b", {"x": 1}, {"y": [1, 2]}, None, True, 10**12]
    coll.insert_many([{"_id": i} for i in ids])
    cuts = [2, "a", {"x": 0}]
    ranges = [(None, cuts[0])] + list(zip(cuts[:-1], cuts[1:], strict=True)) + [(cuts[-1], None)]
    seen = []
    for low, high in ranges:
        cursor = coll.find().hint([("_id", 1)])
        if low is not None:
            cursor = cursor.min(list({"_id": low}.items()))
        if high is not None:
            cursor = cursor.max(list({"_id": high}.items()))
        seen += [d["_id"] for d in cursor]
    assert len(seen) == len(ids)
    assert sorted(map(repr, seen)) == sorted(repr(d["_id"]) for d in coll.find())


def test_bad_hint_is_bad_value(coll):
    coll.insert_one({"a": 1})
    message = "hint provided does not correspond to an existing index"
    with raises_code("BadValue") as info:
        list(coll.find({"a": 1}).hint("nope"))
    assert message in str(info.value)
    with raises_code("BadValue") as info:
        coll.count_documents({"a": 1}, hint=[("zz", 1)])
    assert message in str(info.value)


def test_explain_verbosities_and_commands(indexed, db):
    planner = db.command("explain", {"find": "c", "filter": {"a": 3}}, verbosity="queryPlanner")
    assert "executionStats" not in planner
    ixscan = planner["queryPlanner"]["winningPlan"]["inputStage"]
    assert ixscan["stage"] == "IXSCAN"
    assert ixscan["indexBounds"] == {"a": ["[3, 3]"]}
    full = db.command("explain", {"find": "c", "filter": {"a": 3}})
    expected = db["plain"].count_documents({"a": 3})
    assert full["executionStats"]["nReturned"] == expected
    assert full["executionStats"]["totalDocsExamined"] == expected
    assert len(full["executionStats"]["allPlansExecution"]) >= 2
    for command, root in [
        ({"count": "c", "query": {"a": 3}}, "COUNT"),
        ({"update": "c", "updates": [{"q": {"a": 3}, "u": {"$set": {"z": 1}}}]}, "UPDATE"),
        ({"delete": "c", "deletes": [{"q": {"a": 3}, "limit": 0}]}, "DELETE"),
    ]:
        reply = db.command("explain", command, verbosity="executionStats")
        assert reply["queryPlanner"]["winningPlan"]["stage"] == root
    assert indexed.count_documents({"a": 3}) == expected, "explain does not write"
    agg = db.command(
        "explain",
        {"aggregate": "c", "pipeline": [{"$match": {"a": 3}}, {"$count": "n"}], "cursor": {}},
    )
    # $count reads no field: the index entries answer it (a covered plan, no FETCH).
    assert agg["stages"][0]["$cursor"]["queryPlanner"]["winningPlan"]["stage"] == "IXSCAN"
    with raises_code("BadValue"):
        db.command("explain", {"find": "c"}, verbosity="loud")


# The query shape hash covers the database's name, which each test run chooses.
VOLATILE = {
    "executionTimeMillis",
    "executionTimeMillisEstimate",
    "serverInfo",
    "command",
    "queryShapeHash",
}


def _strip(value):
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in VOLATILE and k != "$clusterTime"}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


GOLDEN = {
    "collscan": {"find": "c", "filter": {"s": {"$regex": "^x"}}},
    "point": {"find": "c", "filter": {"a": 3}},
    "compound_range": {"find": "c", "filter": {"a": {"$in": [1, 5]}, "b": {"$gte": 10}}},
    "sort_skip_limit_projection": {
        "find": "c",
        "filter": {"b": {"$lt": 4}},
        "sort": {"a": 1},
        "skip": 2,
        "limit": 3,
        "projection": {"a": 1},
    },
    "multikey": {"find": "c", "filter": {"tags": {"$gt": 1, "$lt": 3}}},
    "backward": {
        "find": "c",
        "filter": {"a": {"$in": [2, 6]}, "b": {"$gt": 3}},
        "sort": {"a": -1, "b": 1},
    },
    "count": {"count": "c", "query": {"a": {"$gte": 8}}},
    "covered": {"find": "c", "filter": {"a": {"$gt": 5}}, "projection": {"_id": 0, "a": 1}},
    "delete": {"delete": "c", "deletes": [{"q": {"b": 3}, "limit": 1}]},
}


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_explain_golden(indexed, db, name):
    reply = db.command("explain", GOLDEN[name], verbosity="allPlansExecution")
    got = _strip(reply)
    got["queryPlanner"]["namespace"] = "db.c"
    text = json_util.dumps(got, indent=2, sort_keys=False) + "\n"
    path = GOLDEN_DIR / f"{name}.json"
    if os.environ.get("UPDATE_GOLDEN") == "1" or not path.exists():
        path.write_text(text)
    assert text == path.read_text()


# --- TTL ------------------------------------------------------------------------------


def test_ttl_index_is_listed_and_validated(coll):
    coll.create_index("at", expireAfterSeconds=3600)
    listed = {i["name"]: i for i in coll.list_indexes()}
    assert listed["at_1"]["expireAfterSeconds"] == 3600
    with raises_code("CannotCreateIndex"):
        coll.create_index([("a", 1), ("b", 1)], expireAfterSeconds=10)
    with raises_code("CannotCreateIndex"):
        coll.create_index("x", expireAfterSeconds=-1)
    with raises_code("CannotCreateIndex"):
        coll.create_index("y", expireAfterSeconds="soon")
    with raises_code("IndexOptionsConflict"):
        coll.create_index("at", expireAfterSeconds=60)


def test_coll_mod_changes_expire_after_seconds(db, coll):
    coll.create_index("at", expireAfterSeconds=3600)
    reply = db.command("collMod", "c", index={"keyPattern": {"at": 1}, "expireAfterSeconds": 60})
    assert reply["expireAfterSeconds_old"] == 3600
    assert reply["expireAfterSeconds_new"] == 60
    reply = db.command("collMod", "c", index={"name": "at_1", "expireAfterSeconds": 5})
    assert reply["expireAfterSeconds_old"] == 60
    listed = {i["name"]: i for i in coll.list_indexes()}
    assert listed["at_1"]["expireAfterSeconds"] == 5
    with raises_code("IndexNotFound"):
        db.command("collMod", "c", index={"name": "nope", "expireAfterSeconds": 5})


# --- sorts provided by indexes ---------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "sort"),
    [
        ({"a": 3}, [("b", -1)]),
        ({"a": {"$gte": 2}}, [("a", 1)]),
        ({}, [("b", 1), ("a", 1)]),
        ({"a": {"$in": [1, 4]}}, [("a", 1), ("b", -1)]),
        # Opposite to the key order: the index is read backward.
        ({"a": 3}, [("b", 1)]),
        ({"a": {"$gte": 2}}, [("a", -1)]),
        ({}, [("b", -1), ("a", -1)]),
        ({"a": {"$in": [1, 4]}}, [("a", -1), ("b", 1)]),
        ({"b": {"$in": [2, 9]}, "a": {"$gt": 3}}, [("b", -1), ("a", -1)]),
    ],
)
def test_index_order_replaces_the_blocking_sort(indexed, db, query, sort):
    def keys(cursor):
        return [tuple(d.get(f) for f, _ in sort) for d in cursor]

    got = keys(indexed.find(query).sort(sort).batch_size(5))
    assert got == keys(db["plain"].find(query).sort(sort))
    assert len(got) == db["plain"].count_documents(query)
    limited = keys(indexed.find(query).sort(sort).skip(3).limit(7))
    assert limited == got[3:10]
    plan = indexed.find(query).sort(sort).explain()["queryPlanner"]["winningPlan"]
    assert "SORT" not in json.dumps(plan)


def test_backward_scans_are_shown_and_check_later_fields(indexed, db):
    plan = indexed.find({"a": {"$gt": 2}}).sort([("a", -1), ("b", 1)]).explain()
    scan = plan["queryPlanner"]["winningPlan"]["inputStage"]
    shown = (scan["stage"], scan["indexName"], scan["direction"])
    assert shown == ("IXSCAN", "a_1_b_-1", "backward")
    assert scan["indexBounds"] == {"a": ["[inf.0, 2)"], "b": ["[MinKey, MaxKey]"]}
    # A hinted index whose later field is checked key by key, read backward across
    # batches: the documents of a collection scan, in the order of a blocking sort.
    sort = [("a", -1), ("b", 1)]
    for query in [{"b": 7, "a": {"$gte": 2}}, {"a": {"$in": [1, 5, 9]}, "b": {"$gte": 10}}]:
        cursor = indexed.find(query).sort(sort).hint("a_1_b_-1")
        winning = cursor.explain()["queryPlanner"]["winningPlan"]
        assert winning["inputStage"]["direction"] == "backward"
        got = list(cursor.batch_size(3))
        want = list(db["plain"].find(query).sort(sort))
        assert [(d.get("a"), d.get("b")) for d in got] == [(d.get("a"), d.get("b")) for d in want]
        assert _ids(got) == _ids(want)


def test_multikey_index_does_not_provide_a_sort(indexed):
    plan = indexed.find({"tags": {"$gte": 0}}).sort("tags", 1).explain()["queryPlanner"]
    assert plan["winningPlan"]["stage"] == "SORT"


# --- partial indexes ---------------------------------------------------------------------


def test_partial_index_holds_matching_documents_and_serves_implying_queries(coll):
    coll.create_index("a", partialFilterExpression={"b": {"$gt": 5}}, unique=True)
    listed = {i["name"]: i for i in coll.list_indexes()}
    assert listed["a_1"]["partialFilterExpression"] == {"b": {"$gt": 5}}
    # Unique only among the indexed documents.
    coll.insert_many([{"_id": i, "a": 1, "b": i} for i in range(6)])
    coll.insert_one({"_id": 6, "a": 1, "b": 6})
    with raises_code("DuplicateKey"):
        coll.insert_one({"_id": 7, "a": 1, "b": 7})
    implied = coll.find({"a": 1, "b": {"$gt": 5}}).explain()["queryPlanner"]["winningPlan"]
    assert implied["inputStage"]["isPartial"] is True
    assert [d["_id"] for d in coll.find({"a": 1, "b": {"$gt": 5}})] == [6]
    not_implied = coll.find({"a": 1}).explain()["queryPlanner"]["winningPlan"]
    assert not_implied["stage"] == "COLLSCAN"
    assert len(list(coll.find({"a": 1}))) == 7


def test_partial_index_options_are_checked(coll):
    with raises_code("CannotCreateIndex"):
        coll.create_index("a", partialFilterExpression={"b": {"$exists": False}})
    with raises_code("CannotCreateIndex"):
        coll.create_index("a", partialFilterExpression={"b": {"$ne": 1}})
    with raises_code("CannotCreateIndex"):
        coll.create_index("a", partialFilterExpression={"b": 1}, sparse=True)


# --- hashed indexes ----------------------------------------------------------------------


def test_hashed_index_serves_equality_only(coll):
    coll.create_index([("k", "hashed")])
    coll.insert_many([{"_id": i, "k": i % 10} for i in range(100)])
    coll.insert_one({"_id": 100, "k": 3.0})
    assert sorted(d["_id"] for d in coll.find({"k": 3})) == [
        3,
        13,
        23,
        33,
        43,
        53,
        63,
        73,
        83,
        93,
        100,
    ]
    assert coll.count_documents({"k": {"$in": [1, 2]}}) == 20
    plan = coll.find({"k": 3}).explain()["queryPlanner"]["winningPlan"]
    assert plan["inputStage"]["keyPattern"] == {"k": "hashed"}
    ranged = coll.find({"k": {"$gt": 7}}).explain()["queryPlanner"]["winningPlan"]
    assert ranged["stage"] == "COLLSCAN"
    assert coll.count_documents({"k": {"$gt": 7}}) == 20


def test_hashed_index_limits(coll):
    # mongod 8's codes: 16764 for a unique hashed index, 31303 for two hashed fields.
    for keys, unique, code in [
        ([("k", "hashed")], True, 16764),
        ([("a", "hashed"), ("b", "hashed")], False, 31303),
    ]:
        with pytest.raises(OperationFailure) as info:
            coll.create_index(keys, unique=unique)
        assert info.value.code == code
    coll.create_index([("k", "hashed")])
    with pytest.raises(Exception, match="hashed indexes do not currently support array values"):
        coll.insert_one({"k": [1, 2]})


def test_or_branches_are_a_union_of_index_scans(indexed, db):
    query = {"$or": [{"a": {"$gte": 5}}, {"b": {"$lt": 6}}]}
    got = [d["_id"] for d in indexed.find(query).batch_size(4)]
    assert sorted(got) == _ids(db["plain"].find(query))
    assert len(got) == len(set(got))
    plan = indexed.find(query).explain()["queryPlanner"]["winningPlan"]
    assert plan["inputStage"]["stage"] == "OR"
    names = [s["indexName"] for s in plan["inputStage"]["inputStages"]]
    assert names == ["a_1", "b_1_a_1"]


def test_index_build_progress_shows_in_current_op(client, coll):
    coll.insert_many([{"a": i, "pad": "x" * 50} for i in range(50_000)])
    builder = threading.Thread(target=lambda: coll.create_index("a"))
    builder.start()
    seen = []
    while builder.is_alive():
        ops = client.admin.aggregate([{"$currentOp": {}}])
        seen += [op for op in ops if op.get("desc", "").startswith("IndexBuildsCoordinator")]
    builder.join()
    assert seen, "the build was never seen running"
    op = seen[-1]
    assert op["ns"] == coll.full_name
    assert op["command"]["indexes"] == [{"key": {"a": 1}, "name": "a_1"}]
    assert 0 <= op["progress"]["done"] <= op["progress"]["total"] == 50_000
    assert op["msg"].startswith("Index Build: scanning collection")
    after = client.admin.aggregate([{"$currentOp": {}}])
    assert not [op for op in after if op.get("desc", "").startswith("IndexBuildsCoordinator")]


def test_ttl_monitor_deletes_expired_documents_within_one_pass(basalt_binary, tmp_path):
    """With `--setParameter ttlMonitorSleepSecs=1`, a pass runs every second: documents
    whose date is past expireAfterSeconds go, the others (and undated ones) stay."""
    srv = BasaltServer(
        basalt_binary,
        tmp_path / "data",
        tmp_path / "basalt.log",
        extra_args=["--setParameter", "ttlMonitorSleepSecs=1"],
    ).start()
    try:
        coll = srv.client().ttl.c
        coll.create_index("at", expireAfterSeconds=60)
        now = datetime.datetime.now(datetime.timezone.utc)
        coll.insert_many(
            [
                {"_id": "old", "at": now - datetime.timedelta(hours=1)},
                {
                    "_id": "old-array",
                    "at": [now + datetime.timedelta(days=1), now - datetime.timedelta(hours=2)],
                },
                {"_id": "fresh", "at": now},
                {"_id": "undated", "at": "not a date"},
            ]
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and coll.count_documents({}) > 2:
            time.sleep(0.2)
        assert sorted(d["_id"] for d in coll.find()) == ["fresh", "undated"]
    finally:
        srv.stop()


def test_an_index_key_past_the_storage_engine_s_limit_is_key_too_long(db):
    coll = db.c
    coll.create_index("a")
    huge = "x" * 70_000
    with raises_code("KeyTooLong"):
        coll.insert_one({"_id": huge})
    with raises_code("KeyTooLong"):
        coll.insert_one({"_id": 1, "a": huge})
    coll.insert_one({"_id": 2, "b": huge})
    with raises_code("KeyTooLong"):
        coll.update_one({"_id": 2}, {"$set": {"a": huge}})
    # Nothing half-written; an index over the existing value is refused as a whole.
    assert list(coll.find({}, {"b": 0})) == [{"_id": 2}]
    with raises_code("KeyTooLong"):
        coll.create_index("b")
    assert sorted(coll.index_information()) == ["_id_", "a_1"]
    # Just within the limit is fine.
    coll.insert_one({"_id": 3, "a": "y" * 65_000})
    assert coll.count_documents({"a": "y" * 65_000}) == 1


def test_an_index_prepared_then_made_unique(coll):
    """collMod's prepareUnique refuses new duplicates and keeps the old ones; unique then
    turns the index unique once none are left, naming them until then (MongoDB 6.0)."""
    coll.insert_many([{"_id": 1, "x": 1}, {"_id": 2, "x": 1}, {"_id": 3, "x": 2}])
    coll.create_index("x")
    db = coll.database
    reply = db.command("collMod", coll.name, index={"keyPattern": {"x": 1}, "prepareUnique": True})
    assert (reply["prepareUnique_old"], reply["prepareUnique_new"]) == (False, True)
    with pytest.raises(DuplicateKeyError):
        coll.insert_one({"_id": 4, "x": 2})
    with pytest.raises(OperationFailure) as refused:
        db.command("collMod", coll.name, index={"keyPattern": {"x": 1}, "unique": True})
    assert refused.value.code == 359
    assert refused.value.details["violations"] == [{"ids": [1, 2]}]
    # 8.0's dryRun checks the conversion without making it.
    with pytest.raises(OperationFailure) as refused:
        db.command("collMod", coll.name, index={"name": "x_1", "unique": True}, dryRun=True)
    assert refused.value.code == 359
    coll.delete_one({"_id": 2})
    checked = db.command("collMod", coll.name, index={"name": "x_1", "unique": True}, dryRun=1)
    assert "unique_new" not in checked
    assert "unique" not in next(i for i in coll.list_indexes() if i["name"] == "x_1")
    with raises_code("InvalidOptions"):
        db.command("collMod", coll.name, index={"name": "x_1", "hidden": True}, dryRun=True)
    assert (
        db.command("collMod", coll.name, index={"name": "x_1", "unique": True})["unique_new"]
        is True
    )
    assert next(i for i in coll.list_indexes() if i["name"] == "x_1")["unique"] is True
    coll.create_index("y")
    with raises_code("InvalidOptions"):
        db.command(
            "collMod", coll.name, index={"name": "y_1", "prepareUnique": True, "hidden": True}
        )


def test_compound_keys_in_another_order_are_another_index(coll):
    # mongod compares key patterns field by field in order: {a, b} and {b, a} are two
    # indexes, each named, dropped and hinted by its own pattern.
    coll.insert_many([{"_id": i, "a": i % 3, "b": i} for i in range(6)])
    assert coll.create_index([("a", 1), ("b", 1)]) == "a_1_b_1"
    assert coll.create_index([("b", 1), ("a", 1)]) == "b_1_a_1"
    # The same pattern again, with a numerically equal direction, is the same index.
    same = coll.database.command(
        {"createIndexes": coll.name, "indexes": [{"key": {"b": 1.0, "a": 1}, "name": "b_1_a_1"}]}
    )
    assert same["numIndexesBefore"] == same["numIndexesAfter"] == 3
    with raises_code("IndexOptionsConflict"):
        coll.create_index([("b", 1), ("a", 1)], name="other")
    plan = coll.find({"a": 1}).hint([("b", 1), ("a", 1)]).explain()
    assert plan["queryPlanner"]["winningPlan"]["inputStage"]["indexName"] == "b_1_a_1"
    coll.drop_index([("b", 1), ("a", 1)])
    assert sorted(coll.index_information()) == ["_id_", "a_1_b_1"]


@pytest.mark.parametrize(
    ("spec", "code"),
    [
        ({"key": {"a": 1}}, 9),
        ({"key": {f"f{i}": 1 for i in range(33)}, "name": "wide"}, 13103),
        ({"key": {"": 1}, "name": "empty"}, 67),
        ({"key": {"a..b": 1}, "name": "dots"}, 67),
        ({"key": {"$a": 1}, "name": "dollar"}, 67),
        ({"key": {"a": "hashed", "b": "hashed"}, "name": "two_hashed"}, 31303),
        ({"key": {"a": "hashed"}, "name": "unique_hashed", "unique": True}, 16764),
        ({"key": {"_id": 1}, "name": "hidden_id", "hidden": True}, 197),
        ({"key": {"a": 1}, "name": "hidden_one", "hidden": 1}, 14),
        ({"key": {"_id": -1}, "name": "id_down"}, 2),
        ({"key": {"a": 1}, "name": "weighted", "weights": {"a": 2}}, 67),
    ],
)
def test_index_specs_are_refused_as_mongod_refuses_them(db, spec, code):
    with pytest.raises(OperationFailure) as info:
        db.command("createIndexes", "c", indexes=[spec])
    assert info.value.code == code
    assert "c" not in db.list_collection_names() or len(db.c.index_information()) == 1


def test_a_collection_has_at_most_64_indexes(db):
    """64 indexes, _id_ included, as mongod allows; the 65th is CannotCreateIndex."""
    specs = [{"key": {f"f{i}": 1}, "name": f"f{i}_1"} for i in range(63)]
    assert db.command("createIndexes", "c", indexes=specs)["numIndexesAfter"] == 64
    with pytest.raises(OperationFailure) as info:
        db.command("createIndexes", "c", indexes=[{"key": {"g": 1}, "name": "g_1"}])
    assert info.value.code == 67
