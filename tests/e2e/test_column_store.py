"""Column store indexes: `createIndex({"$**": "columnstore"})` keeps the collection's
documents as row groups of typed column chunks, and an aggregation whose head is
`$match` stages then `$group`/`$count` reads them (explain: `COLUMN_SCAN`), as does a
find, count, update or delete, which fetches only the documents its filter selects
from the chunks (explain: `FETCH` over `COLUMN_SCAN`). Every
answer must be the row engine's: the same pipelines run against a twin collection
without the index, over documents with mixed types, nulls, missing paths, arrays and
embedded documents, before and after writes, merges and a `kill -9`.
"""

from __future__ import annotations

import random
import time

import pytest
from pymongo.errors import OperationFailure

COLUMN_STORE = {"$**": "columnstore"}


def make_docs(count: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    kinds = ["a", "b", "c", None]
    docs = []
    for i in range(count):
        doc = {"_id": i, "k": rng.choice(kinds), "n": rng.randrange(-50, 1000)}
        roll = rng.random()
        if roll < 0.05:
            doc["n"] = rng.choice([None, 2.5, "12", [1, 2], 2**40])
        elif roll < 0.1:
            del doc["n"]
        doc["t"] = {"v": rng.uniform(-10, 40), "q": rng.choice(["1", "2", "5"])}
        if rng.random() < 0.03:
            doc["t"] = rng.choice([7, None, {"v": None}, [{"v": 1.0, "q": "1"}]])
        doc["d"] = rng.randrange(0, 10) / 4
        docs.append(doc)
    return docs


PIPELINES = [
    [{"$group": {"_id": "$k", "n": {"$sum": 1}, "s": {"$sum": "$n"}, "a": {"$avg": "$n"}}}],
    [
        {"$match": {"t.q": {"$in": ["1", "5"]}}},
        {"$group": {"_id": None, "max": {"$max": "$t.v"}, "min": {"$min": "$t.v"}}},
    ],
    [{"$match": {"n": {"$gte": 100, "$lt": 500}, "k": {"$ne": "b"}}}, {"$count": "c"}],
    [{"$match": {"$expr": {"$gt": ["$d", 1]}}}, {"$count": "c"}],
    [
        {"$match": {"$or": [{"k": "a"}, {"t.q": "2"}]}},
        {"$group": {"_id": {"$concat": [{"$ifNull": ["$k", "-"]}, "!"]}, "c": {"$count": {}}}},
    ],
    [
        {"$project": {"_id": 0, "x": {"$multiply": ["$d", 2]}, "k": 1}},
        {"$group": {"_id": "$k", "x": {"$sum": "$x"}, "first": {"$first": "$x"}}},
    ],
    [
        {"$match": {"k": {"$exists": False}}},
        {"$group": {"_id": "$d", "ids": {"$push": "$_id"}, "last": {"$last": "$t.q"}}},
    ],
    [{"$group": {"_id": "$t", "c": {"$sum": 1}}}],
    [{"$match": {"k": None}}, {"$group": {"_id": "$t.q", "s": {"$addToSet": "$n"}}}],
    [{"$match": {"k": "a"}}, {"$group": {"_id": None, "s": {"$sum": "$d"}}}],
    [{"$match": {"d": {"$gt": 0.5}}}, {"$sortByCount": "$k"}],
    [
        {
            "$bucket": {
                "groupBy": "$n",
                "boundaries": [-50, 0, 100, 500],
                "default": "other",
                "output": {"c": {"$sum": 1}, "d": {"$avg": "$d"}},
            }
        }
    ],
    [{"$bucket": {"groupBy": "$d", "boundaries": [0, 1, 2, 3], "default": "over"}}],
]


def results(coll, pipeline, **kwargs):
    out = list(coll.aggregate(pipeline, **kwargs))
    return sorted(out, key=repr)


def winning_plan(coll, pipeline, **kwargs):
    explained = coll.database.command(
        "explain",
        {"aggregate": coll.name, "pipeline": pipeline, "cursor": {}, **kwargs},
        verbosity="queryPlanner",
    )
    cursor = explained["stages"][0]["$cursor"] if "stages" in explained else explained
    return cursor["queryPlanner"]["winningPlan"]


@pytest.fixture
def twins(db):
    docs = make_docs(3000, seed=7)
    plain, indexed = db["plain"], db["indexed"]
    plain.insert_many(docs)
    indexed.insert_many(docs)
    indexed.create_index([("$**", "columnstore")])
    return plain, indexed


def assert_same(plain, indexed):
    for pipeline in PIPELINES:
        assert results(indexed, pipeline) == results(plain, pipeline), pipeline


def test_answers_are_the_row_engines(twins):
    plain, indexed = twins
    assert_same(plain, indexed)
    plan = winning_plan(indexed, PIPELINES[9])
    assert plan["stage"] == "COLUMN_SCAN"
    assert plan["paths"] == ["d", "k"]
    assert plan["rowGroupsFromChunks"] == 1 and plan["rowGroupsFromDocuments"] == 0
    assert plan["conditionsOnChunks"] == 1 and plan["group"] == "fromChunks"
    plan = winning_plan(indexed, PIPELINES[3])
    assert (plan["conditionsOnChunks"], plan["rowFilter"], plan["group"]) == (1, False, "count")
    # A key expression is evaluated once per distinct value of the paths it reads...
    plan = winning_plan(indexed, PIPELINES[4])
    assert (plan["rowFilter"], plan["group"]) == (True, "fromChunks")
    # ... unless it changes from row to row.
    random_key = [{"$group": {"_id": {"$lt": [{"$rand": {}}, 2]}, "c": {"$sum": 1}}}]
    assert winning_plan(indexed, random_key)["group"] == "perRow"
    assert results(indexed, random_key) == results(plain, random_key)
    # A head reading a path that is an array or a document somewhere runs on the
    # documents.
    assert winning_plan(indexed, PIPELINES[1])["rowGroupsFromChunks"] == 0
    assert winning_plan(indexed, PIPELINES[7])["rowGroupsFromChunks"] == 0
    assert winning_plan(plain, PIPELINES[1])["stage"] != "COLUMN_SCAN"
    # $sortByCount and $bucket are a $group then a $sort: the group runs on the chunks.
    for pipeline in PIPELINES[10:]:
        plan = winning_plan(indexed, pipeline)
        assert (plan["stage"], plan["group"]) == ("COLUMN_SCAN", "fromChunks"), pipeline
    assert winning_plan(indexed, PIPELINES[12])["rowGroupsFromChunks"] == 1
    # A value in no bucket and no default: the row engine's error, from the chunks too.
    no_default = [{"$bucket": {"groupBy": "$d", "boundaries": [0, 1, 2]}}]
    for coll in (plain, indexed):
        with pytest.raises(OperationFailure) as failure:
            coll.aggregate(no_default)
        assert failure.value.code == 40066


def test_writes_are_seen_at_once_and_merged_later(twins):
    plain, indexed = twins
    for coll in (plain, indexed):
        coll.insert_many([{"_id": 10_000 + i, "k": "a", "n": i} for i in range(300)])
        coll.update_many({"k": "b"}, {"$set": {"d": 9.5, "n": 7, "k": "bb"}})
        coll.delete_many({"k": "c", "n": {"$lt": 200}})
    assert_same(plain, indexed)
    # Until the merge, the written row group is read from its documents.
    deadline = time.monotonic() + 30
    while winning_plan(indexed, PIPELINES[9])["rowGroupsFromDocuments"] != 0:
        assert time.monotonic() < deadline, "the written row group was never merged"
        time.sleep(0.2)
    assert_same(plain, indexed)


def test_many_row_groups_and_a_kill_9(own_server):
    client = own_server.client()
    plain, indexed = client.cs.plain, client.cs.indexed
    docs = [{"_id": i, "k": "abc"[i % 3], "n": i % 1000, "t": {"v": i / 8}} for i in range(140_000)]
    for coll in (plain, indexed):
        for start in range(0, len(docs), 20_000):
            coll.insert_many(docs[start : start + 20_000])
    indexed.create_index(COLUMN_STORE, name="cs")
    pipeline = [{"$match": {"n": {"$lt": 500}}}, {"$group": {"_id": "$k", "s": {"$sum": "$t.v"}}}]
    plan = winning_plan(indexed, pipeline)
    assert (plan["rowGroups"], plan["rowGroupsFromChunks"]) == (3, 3)
    assert results(indexed, pipeline) == results(plain, pipeline)
    for coll in (plain, indexed):
        coll.update_many({"_id": {"$in": [5, 70_000, 139_999]}}, {"$set": {"n": 7, "k": "z"}})
    assert indexed.database.command("validate", indexed.name)["valid"] is True
    own_server.kill()
    own_server.start()
    client = own_server.client()
    plain, indexed = client.cs.plain, client.cs.indexed
    assert results(indexed, pipeline) == results(plain, pipeline)
    assert [i["name"] for i in indexed.list_indexes()] == ["_id_", "cs"]
    assert winning_plan(indexed, pipeline)["stage"] == "COLUMN_SCAN"
    assert indexed.database.command("validate", indexed.name)["valid"] is True


def test_a_build_skips_row_groups_left_without_records(db):
    """The build finds the row groups that hold records by seeking past each one: a
    row group whose records were all deleted (record ids 60,001-135,001 cover the
    second one) is skipped, and the groups after it are built."""
    plain, indexed = db.plain, db.indexed
    docs = [{"_id": i, "k": "abc"[i % 3], "n": i % 1000} for i in range(140_000)]
    for coll in (plain, indexed):
        for start in range(0, len(docs), 20_000):
            coll.insert_many(docs[start : start + 20_000])
        coll.delete_many({"_id": {"$gte": 60_000, "$lte": 135_000}})
    indexed.create_index(COLUMN_STORE, name="cs")
    pipeline = [{"$group": {"_id": "$k", "n": {"$sum": "$n"}, "c": {"$sum": 1}}}]
    plan = winning_plan(indexed, pipeline)
    # Both row groups with records come from chunks (the empty one between them has
    # none to read).
    assert plan["rowGroupsFromChunks"] == 2
    assert results(indexed, pipeline) == results(plain, pipeline)


def test_row_groups_whose_bounds_rule_them_out_are_not_read(db):
    """Each row group's header keeps every chunk's least and greatest value: a filter
    no value in that range can pass skips the row group without reading its chunks
    (explain's `rowGroupsSkipped`), in an aggregation, a find and a count alike; a row
    group written since its build is read from its documents instead."""
    plain, indexed = db.plain, db.indexed
    docs = [
        # `x`: ints in the first row group, doubles of the same values after it.
        {
            "_id": i,
            "n": i,
            "k": "abc"[i % 3],
            "s": f"s{i:06d}",
            "x": i % 7 if i < 65_535 else i % 7 + 0.0,
        }
        for i in range(140_000)
    ]
    for coll in (plain, indexed):
        coll.insert_many(docs)
    indexed.create_index(COLUMN_STORE, name="cs")
    # The first of equal values in record order stands for them, across row groups.
    for filter in ({}, {"n": {"$gte": 100_000}}, {"k": "b"}):
        assert indexed.distinct("x", filter) == plain.distinct("x", filter), filter
    group = {"$group": {"_id": "$k", "c": {"$sum": 1}, "n": {"$sum": "$n"}}}
    cases = [
        ({"n": {"$gte": 135_000}}, 2),
        ({"n": {"$in": [5, 200_000, "x"]}}, 2),
        ({"s": {"$lt": "s000100"}, "k": "a"}, 2),
        ({"n": {"$gt": 1_000_000}}, 3),
        ({"n": {"$lt": "a"}}, 3),
        ({"n": {"$gte": 70_000, "$lt": 70_010}}, 2),
        ({"n": {"$ne": 3}}, 0),
    ]

    def same_answers(filter):
        pipeline = [{"$match": filter}, group]
        assert results(indexed, pipeline) == results(plain, pipeline), filter
        assert list(indexed.find(filter)) == list(plain.find(filter)), filter
        assert indexed.count_documents(filter) == plain.count_documents(filter), filter

    for filter, skipped in cases:
        plan = winning_plan(indexed, [{"$match": filter}, group])
        assert (plan["rowGroupsSkipped"], plan["rowGroupsFromChunks"]) == (skipped, 3 - skipped)
        assert find_plan(indexed, filter)["inputStage"]["rowGroupsSkipped"] == skipped, filter
        same_answers(filter)
    # A write to the first row group: it is read from its documents until it merges.
    for coll in (plain, indexed):
        coll.update_one({"_id": 3}, {"$set": {"n": 150_000}})
    plan = winning_plan(indexed, [{"$match": cases[0][0]}, group])
    assert (plan["rowGroupsSkipped"], plan["rowGroupsFromDocuments"]) == (1, 1)
    same_answers(cases[0][0])


def test_sorted_finds_with_a_limit_fetch_only_what_the_chunks_rank_first(db):
    """A find with a sort and a limit ranks the rows its filter selects by the sort's
    values in the chunks and fetches only the first `skip + limit` of them (explain:
    `topK`, docs examined); a row group written since its build hands all its matching
    documents to the sort. Ties keep record order, as the row engine's stable sort."""
    plain, indexed = db.plain, db.indexed
    rng = random.Random(11)
    docs = [
        {
            "_id": i,
            "n": rng.randrange(0, 50_000),
            "k": "abc"[i % 3],
            "s": f"s{rng.randrange(999):03d}",
        }
        for i in range(70_000)
    ]
    for doc in docs[::97]:
        del doc["n"]
    for coll in (plain, indexed):
        coll.insert_many(docs)
    indexed.create_index(COLUMN_STORE, name="cs")
    cases = [
        ({"k": "a"}, [("n", -1)], 0, 5),
        ({"k": {"$ne": "b"}}, [("n", 1)], 0, 8),
        ({"n": {"$gte": 100}}, [("s", 1), ("n", -1)], 3, 4),
        ({"k": "c"}, [("k", 1)], 0, 6),
        ({"s": {"$lt": "s500"}}, [("s", -1), ("_id", 1)], 10, 20),
    ]

    cases.append(({}, [("n", -1)], 0, 10))

    def same_answers():
        for filter, sort, skip, limit in cases:
            want = list(plain.find(filter).sort(sort).skip(skip).limit(limit))
            assert list(indexed.find(filter).sort(sort).skip(skip).limit(limit)) == want, sort
            # An aggregation's `$sort` with a `$limit` after its `$match` too.
            pipeline = [{"$match": filter}, {"$sort": dict(sort)}, {"$limit": skip + limit}]
            assert list(indexed.aggregate(pipeline)) == list(plain.aggregate(pipeline)), sort

    same_answers()
    for filter, sort, skip, limit in cases:
        plan = find_plan(indexed, filter, sort=dict(sort), skip=skip, limit=limit)
        assert column_scan(plan)["topK"] == {
            "sortPattern": dict(sort),
            "limitAmount": skip + limit,
        }
        # Each of the two row groups is served: at most skip + limit from each.
        assert plan["executionStats"]["totalDocsExamined"] <= 2 * (skip + limit), sort
    # Without a limit, the sort reads every match.
    assert "topK" not in column_scan(find_plan(indexed, {"k": "a"}, sort={"n": -1}))
    for coll in (plain, indexed):
        coll.update_many({"_id": {"$in": [4, 9, 66_000]}}, {"$set": {"n": 60_000}})
    same_answers()


def test_kill_9_during_merges(own_server):
    """Row groups rebuilt in the background while the process dies: after the restart
    every answer is still the row engine's, and the merge finishes its work."""
    client = own_server.client()
    plain, indexed = client.cs.plain, client.cs.indexed
    docs = [{"_id": i, "k": "abc"[i % 3], "n": i % 1000, "v": i / 4} for i in range(140_000)]
    for coll in (plain, indexed):
        coll.insert_many(docs)
    indexed.create_index(COLUMN_STORE, name="cs")
    pipeline = [{"$match": {"n": {"$lt": 400}}}, {"$group": {"_id": "$k", "s": {"$sum": "$v"}}}]
    rng = random.Random(3)
    for turn in range(3):
        # Thousands of writes in every row group make each due for a rebuild...
        for coll in (plain, indexed):
            coll.update_many({"n": {"$lt": 40}}, {"$inc": {"v": 1}, "$set": {"k": f"r{turn}"}})
            coll.insert_many(
                [
                    {"_id": 200_000 + turn * 5_000 + i, "k": "x", "n": i % 1000, "v": 1.5}
                    for i in range(5_000)
                ]
            )
        # ... which the background pass starts after half a second of quiet.
        time.sleep(rng.uniform(0.5, 2.5))
        own_server.kill()
        own_server.start()
        client = own_server.client()
        plain, indexed = client.cs.plain, client.cs.indexed
        assert results(indexed, pipeline) == results(plain, pipeline)
        filter = {"k": f"r{turn}", "n": 7}
        assert list(indexed.find(filter)) == list(plain.find(filter))
        assert indexed.database.command("validate", indexed.name)["valid"] is True
    deadline = time.monotonic() + 60
    while winning_plan(indexed, pipeline)["rowGroupsFromDocuments"] != 0:
        assert time.monotonic() < deadline, "the written row groups were never merged"
        time.sleep(0.2)
    assert results(indexed, pipeline) == results(plain, pipeline)


def test_hints_choose_or_refuse_the_column_store(twins):
    _, indexed = twins
    indexed.create_index("n")
    ranged = [{"$match": {"n": {"$gt": 10}}}, {"$count": "c"}]
    point = [{"$match": {"n": 10}}, {"$count": "c"}]
    assert winning_plan(indexed, ranged)["stage"] == "COLUMN_SCAN"
    assert winning_plan(indexed, point)["stage"] != "COLUMN_SCAN"
    assert winning_plan(indexed, point, hint="$**_columnstore")["stage"] == "COLUMN_SCAN"
    assert winning_plan(indexed, ranged, hint={"$natural": 1})["stage"] != "COLUMN_SCAN"
    assert winning_plan(indexed, ranged, hint="n_1")["stage"] != "COLUMN_SCAN"
    for hint in ("$**_columnstore", {"$natural": 1}, "n_1"):
        assert results(indexed, point, hint=hint) == results(indexed, point)
    # A find hinted to the column store reads it too.
    hinted = list(indexed.find({"n": 11}).hint("$**_columnstore"))
    assert hinted == list(indexed.find({"n": 11})) and len(hinted) == 1
    assert (
        find_plan(indexed, {"n": 11}, hint="$**_columnstore")["inputStage"]["stage"]
        == "COLUMN_SCAN"
    )
    assert find_plan(indexed, {"n": 11})["inputStage"]["stage"] == "IXSCAN"


FILTERS = [
    {"k": "a", "d": 2.25},
    {"t.q": "5", "d": {"$lt": 1}},
    {"n": {"$in": [1, 2, 3, "12", None]}},
    {"$expr": {"$gt": ["$d", 2]}, "k": {"$ne": "c"}},
    {"k": {"$exists": False}, "d": {"$gte": 2}},
    {"$or": [{"k": "a"}, {"t.q": "2"}], "d": 0.5},
    {"d": {"$gte": 0}},
    {"d": 7.5},
]


def find_plan(coll, filter, **kwargs):
    explained = coll.database.command(
        "explain", {"find": coll.name, "filter": filter, **kwargs}, verbosity="executionStats"
    )
    plan = explained["queryPlanner"]["winningPlan"]
    plan["executionStats"] = explained["executionStats"]
    return plan


def wait_until_merged(coll, filter):
    """Waits (30 s at most) until a find with `filter` reads every row group from its
    chunks: the background merge has rebuilt the written ones."""
    deadline = time.monotonic() + 30
    while find_plan(coll, filter)["inputStage"]["rowGroupsFromDocuments"] != 0:
        assert time.monotonic() < deadline, "the written row group was never merged"
        time.sleep(0.2)


def column_scan(plan):
    """The `COLUMN_SCAN` stage under a find's winning plan."""
    while plan["stage"] != "COLUMN_SCAN":
        plan = plan["inputStage"]
    return plan


def test_finds_counts_and_writes_read_the_chunks(twins):
    plain, indexed = twins

    def same_finds():
        for filter in FILTERS:
            want = list(plain.find(filter).sort("_id", 1))
            assert list(indexed.find(filter).sort("_id", 1)) == want, filter
            # Natural order, in small batches (getMores resume within the selection).
            assert list(indexed.find(filter).batch_size(7)) == list(plain.find(filter)), filter
            window = indexed.find(filter, {"k": 1, "t.q": 1}).skip(3).limit(20)
            assert list(window) == list(plain.find(filter, {"k": 1, "t.q": 1}).skip(3).limit(20))
            count = {"count": indexed.name, "query": filter}
            assert indexed.database.command(count)["n"] == len(want), filter

    same_finds()
    plan = find_plan(indexed, FILTERS[0])
    assert plan["stage"] == "FETCH" and plan["filter"] == FILTERS[0]
    scan = plan["inputStage"]
    assert (scan["stage"], scan["paths"], scan["rowGroupsFromChunks"]) == (
        "COLUMN_SCAN",
        ["d", "k"],
        1,
    )
    stats = plan["executionStats"]
    # Only the selected documents are read.
    assert stats["totalDocsExamined"] == stats["nReturned"] == plain.count_documents(FILTERS[0])
    # Most rows pass: the row group is scanned, not fetched record by record.
    assert find_plan(indexed, FILTERS[6])["executionStats"]["totalDocsExamined"] == 3000
    # A filter with nothing to run as loops over chunks, or with a collation, scans.
    assert find_plan(indexed, {"$or": [{"k": "a"}, {"d": 1}]})["stage"] == "COLLSCAN"
    assert find_plan(indexed, FILTERS[0], collation={"locale": "fr"})["stage"] == "COLLSCAN"
    # A bad filter gets MongoDB's error, as without the index.
    for coll in (plain, indexed):
        with pytest.raises(OperationFailure) as failure:
            list(coll.find({"k": {"$bogus": 1}, "d": 2.25}))
        assert failure.value.code == 2
    for coll in (plain, indexed):
        coll.update_many({"k": "a", "d": 2.25}, {"$set": {"d": 7.5, "n": "seven"}})
        coll.delete_many({"t.q": "5", "d": {"$lt": 0.5}})
        coll.insert_many([{"_id": 20_000 + i, "k": "a", "d": 2.25} for i in range(50)])
    # Written row groups are read from their documents until they merge.
    same_finds()
    wait_until_merged(indexed, FILTERS[0])
    same_finds()


def test_distinct_takes_the_key_from_its_chunk(twins):
    """`distinct` reads the key's chunk where the row group serves it (no document is
    decoded), the documents elsewhere (arrays, mixed types): the values, their order
    and which of equal numbers stands for them are the row engine's."""
    plain, indexed = twins
    keys = ["k", "d", "t.q", "t.v", "n", "t", "nothing"]
    filters = [{}, {"d": {"$gt": 1}}, {"k": {"$in": ["a", None]}}, {"$expr": {"$lt": ["$d", 1]}}]

    def same_values():
        for key in keys:
            for filter in filters:
                want = plain.distinct(key, filter)
                assert indexed.distinct(key, filter) == want, (key, filter)

    same_values()
    explained = indexed.database.command(
        "explain", {"distinct": indexed.name, "key": "d", "query": {}}, verbosity="queryPlanner"
    )
    assert column_scan(explained["queryPlanner"]["winningPlan"])["paths"] == ["d"]

    # Each distinct read through it counts as a use of the index in `$indexStats`.
    def uses():
        stats = indexed.aggregate([{"$indexStats": {}}])
        return {s["name"]: s["accesses"]["ops"] for s in stats}["$**_columnstore"]

    before = uses()
    indexed.distinct("d")
    assert uses() == before + 1
    # 1, 1.0 and NumberLong(1) are one value: the first in record order stands for it.
    for coll in (plain, indexed):
        coll.insert_many([{"_id": 10_000 + i, "d": value} for i, value in enumerate([1.0, 1, 2])])
        coll.update_many({"k": "c"}, {"$set": {"d": 1.5}})
    same_values()
    # (`d` now holds ints and doubles: its row group reads it from documents for good.)
    wait_until_merged(indexed, {"k": "a"})
    same_values()


PROJECTIONS = [
    [{"$match": {"k": "a"}}, {"$project": {"_id": 0, "x": {"$multiply": ["$d", 2]}, "k": 1}}],
    [{"$project": {"_id": 0, "band": {"$cond": [{"$gt": ["$d", 1]}, "hi", "lo"]}}}],
    [
        {"$match": {"d": {"$gt": 0.5}}},
        {"$project": {"y": {"$add": ["$d", 1]}, "s": {"$concat": [{"$ifNull": ["$k", "-"]}, "!"]}}},
        {"$sort": {"y": -1, "_id": 1}},
        {"$limit": 7},
    ],
    [{"$project": {"_id": 0, "q": "$t.q", "v": {"$ifNull": ["$t.v", "none"]}}}],
    # Two stored fields kept: their order is the document's, so documents are read.
    [{"$match": {"k": "b"}}, {"$project": {"k": 1, "d": 1}}],
]


def test_leading_projections_take_documents_made_from_the_chunks(twins):
    """A pipeline whose first stage after its `$match` is a `$project` that reads only
    named paths, and keeps at most one stored field (so its output does not depend on
    the order of the document's fields), is handed documents made of those paths'
    values in the chunks: no document is read where the row group serves them."""
    plain, indexed = twins

    def same():
        for pipeline in PROJECTIONS:
            assert list(indexed.aggregate(pipeline)) == list(plain.aggregate(pipeline)), pipeline
            small = indexed.aggregate(pipeline, batchSize=3)
            assert list(small) == list(plain.aggregate(pipeline)), pipeline

    same()
    db = indexed.database
    db.command("profile", 2)
    list(indexed.aggregate(PROJECTIONS[0], comment="rows"))
    list(indexed.aggregate(PROJECTIONS[4], comment="documents"))
    db.command("profile", 0)
    examined = {
        e["command"]["comment"]: e["docsExamined"]
        for e in db.system.profile.find({"command.comment": {"$exists": True}})
    }
    assert examined["rows"] == 0
    assert examined["documents"] > 0
    for coll in (plain, indexed):
        coll.update_many({"k": "a", "d": {"$lt": 1}}, {"$set": {"d": 9.75}})
    # The written row group reads its documents until it merges.
    same()
    wait_until_merged(indexed, {"k": "a"})
    same()


def test_projection_keeps_only_its_paths(db):
    coll = db["projected"]
    coll.insert_many([{"_id": i, "a": i, "b": {"c": i, "d": "x"}, "e": i} for i in range(100)])
    coll.create_index(COLUMN_STORE, columnstoreProjection={"a": 1, "b.c": 1})
    listed = [i for i in coll.list_indexes() if i["name"] == "$**_columnstore"][0]
    assert listed["key"] == COLUMN_STORE and listed["columnstoreProjection"] == {"a": 1, "b.c": 1}
    kept = [{"$group": {"_id": None, "s": {"$sum": "$b.c"}, "m": {"$max": "$a"}}}]
    assert winning_plan(coll, kept)["rowGroupsFromChunks"] == 1
    assert list(coll.aggregate(kept)) == [{"_id": None, "s": 4950, "m": 99}]
    # A pipeline reading a path the index leaves out reads the documents.
    left_out = [{"$group": {"_id": None, "s": {"$sum": "$e"}, "b": {"$max": "$b.c"}}}]
    assert winning_plan(coll, left_out)["stage"] != "COLUMN_SCAN"
    assert list(coll.aggregate(left_out)) == [{"_id": None, "s": 4950, "b": 99}]
    coll.drop_index("$**_columnstore")
    assert winning_plan(coll, kept)["stage"] != "COLUMN_SCAN"


@pytest.mark.parametrize(
    ("keys", "options", "code"),
    [
        ({"$**": "columnstore"}, {"unique": True}, 67),
        ({"a": 1, "$**": "columnstore"}, {}, 67),
        ({"a": "columnstore"}, {}, 67),
        ({"$**": "columnstore"}, {"columnstoreProjection": {"a": 1, "b": 0}}, 31254),
        ({"$**": "columnstore"}, {"columnstoreProjection": "a"}, 14),
        ({"$**": "columnstore"}, {"columnstoreProjection": {}}, 9),
        ({"a": 1}, {"columnstoreProjection": {"a": 1}}, 2),
    ],
)
def test_bad_specs_get_mongodbs_errors(coll, keys, options, code):
    with pytest.raises(OperationFailure) as failure:
        coll.create_index(list(keys.items()), **options)
    assert failure.value.code == code
