"""Aggregations and counts that run on several scan workers over ranges of a collection
give exactly what one pass gives: the same groups, order-sensitive accumulators
($first, $last, $push) in natural order, errors from any range, and only the fields the
pipeline reads decoded (the results do not change when the rest is missing)."""

import pytest
from pymongo.errors import OperationFailure

from basalt_server import BasaltServer

# Enough records for several ranges (a range holds at least 16 384 records).
N = 60_000


def _docs(n):
    return [
        {
            "_id": i,
            "k": i % 7,
            "v": float(i),
            "s": f"s{i % 3}",
            "nested": {"x": i % 5, "q": "1" if i % 2 else "9"},
            "pad": "x" * (i % 50),
        }
        for i in range(n)
    ]


@pytest.fixture(scope="module")
def data():
    return _docs(N)


@pytest.fixture(scope="module", params=[1, 2], ids=["1-worker", "2-workers"])
def big(request, basalt_binary, tmp_path_factory, data):
    directory = tmp_path_factory.mktemp(f"parallel{request.param}")
    srv = BasaltServer(
        basalt_binary,
        directory / "data",
        directory / "basalt.log",
        extra_args=["--setParameter", f"scanWorkers={request.param}"],
    ).start()
    client = srv.client()
    coll = client.t.big
    coll.insert_many(data)
    yield coll
    client.close()
    srv.stop()


def test_group_matches_a_single_pass(big, data):
    out = list(
        big.aggregate(
            [
                {"$match": {"nested.q": {"$in": ["1"]}}},
                {"$project": {"k": 1, "w": {"$multiply": ["$v", 2]}}},
                {
                    "$group": {
                        "_id": "$k",
                        "n": {"$sum": 1},
                        "sum": {"$sum": "$w"},
                        "first": {"$first": "$_id"},
                        "last": {"$last": "$_id"},
                        "max": {"$max": "$w"},
                        "avg": {"$avg": "$w"},
                    }
                },
                {"$sort": {"_id": 1}},
            ]
        )
    )
    odd = [d for d in data if d["nested"]["q"] == "1"]
    expected = []
    for k in range(7):
        group = [d for d in odd if d["k"] == k]
        ws = [d["v"] * 2 for d in group]
        expected.append(
            {
                "_id": k,
                "n": len(group),
                "sum": sum(ws),
                "first": group[0]["_id"],
                "last": group[-1]["_id"],
                "max": max(ws),
                "avg": sum(ws) / len(ws),
            }
        )
    assert out == expected


def test_push_keeps_natural_order_across_ranges(big):
    out = list(
        big.aggregate([{"$match": {"k": 3}}, {"$group": {"_id": None, "ids": {"$push": "$_id"}}}])
    )
    assert out[0]["ids"] == list(range(3, N, 7))


def test_count_stage_and_count_command(big, data):
    expected = sum(1 for d in data if d["nested"]["x"] == 2 and d["v"] > 100)
    pipeline = [
        {"$match": {"nested.x": 2, "$expr": {"$gt": ["$v", 100]}}},
        {"$count": "n"},
    ]
    assert list(big.aggregate(pipeline)) == [{"n": expected}]
    assert big.count_documents({"nested.x": 2, "v": {"$gt": 100}}) == expected
    n = big.database.command("count", "big", query={"nested.x": 2, "v": {"$gt": 100}})["n"]
    assert n == expected
    assert list(big.aggregate([{"$match": {"k": 99}}, {"$count": "n"}])) == []


def test_where_count_runs_on_every_range(big, data):
    expected = sum(1 for d in data if d["k"] == 1 and d["v"] > 30_000)
    n = big.database.command("count", "big", query={"$where": "this.k == 1 && this.v > 30000"})["n"]
    assert n == expected


def test_unwind_and_computed_group_key(big, data):
    out = list(
        big.aggregate(
            [
                {"$project": {"_id": 0, "parts": ["$k", "$nested.x"]}},
                {"$unwind": "$parts"},
                {"$group": {"_id": {"$mod": ["$parts", 2]}, "n": {"$sum": 1}}},
                {"$sort": {"_id": 1}},
            ]
        )
    )
    parts = [p for d in data for p in (d["k"], d["nested"]["x"])]
    assert out == [
        {"_id": 0, "n": sum(1 for p in parts if p % 2 == 0)},
        {"_id": 1, "n": sum(1 for p in parts if p % 2 == 1)},
    ]


def test_an_error_in_any_range_fails_the_command(big):
    # Only the last document divides by zero.
    pipeline = [
        {"$project": {"r": {"$divide": [1, {"$subtract": ["$_id", N - 1]}]}}},
        {"$group": {"_id": None, "n": {"$sum": "$r"}}},
    ]
    with pytest.raises(OperationFailure) as err:
        list(big.aggregate(pipeline))
    # MongoDB 8's "can't $divide by zero" in $group's slot-based engine, where the
    # $project is fused into the $group.
    assert err.value.code == 4848401
    # The server and the data are fine afterwards.
    assert big.estimated_document_count() == N


def test_root_in_group_still_sees_whole_documents(big, data):
    out = list(
        big.aggregate(
            [
                {"$match": {"_id": {"$lt": 3}}},
                {"$group": {"_id": None, "docs": {"$push": "$$ROOT"}}},
            ]
        )
    )
    assert out[0]["docs"] == data[:3]


def test_get_parameter_reports_scan_workers(big):
    workers = big.database.client.admin.command("getParameter", 1, scanWorkers=1)
    assert workers["scanWorkers"] in (1, 2)


def test_explain_shows_the_split(big):
    pipeline = [
        {"$match": {"k": {"$lt": 3}}},
        {"$addFields": {"w": 1}},
        {"$group": {"_id": "$k", "n": {"$sum": "$w"}}},
        {"$sort": {"_id": 1}},
    ]
    plan = big.database.command("explain", {"aggregate": "big", "pipeline": pipeline, "cursor": {}})
    split = plan["splitPipeline"]
    assert split["shardsPart"] == pipeline[1:3]
    assert split["mergerPart"] == pipeline[3:]
    assert split["workers"] >= 1 and split["ranges"] >= 1
    # A $project before a $group is fused into it: each range runs the fused $group.
    fusable = [
        {"$project": {"_id": 0, "double": {"$multiply": ["$v", 2]}}},
        {"$group": {"_id": None, "total": {"$sum": "$double"}}},
    ]
    plan = big.database.command("explain", {"aggregate": "big", "pipeline": fusable, "cursor": {}})
    assert plan["splitPipeline"]["shardsPart"] == [
        {"$group": {"_id": None, "total": {"$sum": {"$multiply": ["$v", 2]}}}}
    ]
    assert list(big.aggregate(fusable)) == [{"_id": None, "total": float(N * (N - 1))}]
    # A pipeline that cannot be split says nothing of the kind.
    plan = big.database.command(
        "explain", {"aggregate": "big", "pipeline": [{"$sort": {"k": 1}}], "cursor": {}}
    )
    assert "splitPipeline" not in plan


def test_find_over_ranges_keeps_natural_order_across_batches(big, data):
    selective = {"k": 3, "nested.x": {"$ne": 1}}
    expected = [d["_id"] for d in data if d["k"] == 3 and d["nested"]["x"] != 1]
    for batch_size in (0, 5, 1000):
        got = [d["_id"] for d in big.find(selective, {"_id": 1}, batch_size=batch_size)]
        assert got == expected, batch_size
    threes = [d["_id"] for d in data if d["k"] == 3]
    got = [d["_id"] for d in big.find({"k": 3}, {"_id": 1}).skip(1000).limit(2500)]
    assert got == threes[1000:3500]
    got = [d["_id"] for d in big.find({"k": 3}, {"_id": 1}, batch_size=7).limit(20)]
    assert got == threes[:20]
    # Every document matches: batches fill from the first range.
    got = [d["_id"] for d in big.find({"v": {"$gte": 0}}, {"_id": 1}, batch_size=20_000)]
    assert got == list(range(N))
    assert big.find_one({"_id": {"$gt": 59_990}, "k": 0}) == data[59_997]
