"""Covered queries through pymongo: when an index stores every field a query's filter and
projection (or a count, a distinct, an aggregation) read, the answer comes from the
index entries without reading a document — and must be exactly what reading the
documents gives: the stored types (1, 1.0 and NumberLong(1) share a key but not a
value), missing fields left missing, values kept current by updates, original strings
under a collation. explain shows PROJECTION_COVERED over an IXSCAN with no FETCH and
no document examined, as MongoDB's does.
"""

from __future__ import annotations

import pytest
from bson import Int64
from bson.codec_options import CodecOptions
from bson.raw_bson import RawBSONDocument


def _stages(plan):
    """The stage names from the root of a plan down."""
    names = []
    while plan:
        names.append(plan["stage"])
        plan = plan.get("inputStage")
    return names


def _explain_find(db, **find):
    return db.command("explain", {"find": "c", **find}, verbosity="executionStats")


def _natural(coll, query, projection):
    return list(coll.find(query, projection).hint({"$natural": 1}))


def _exact(docs):
    """Documents as their BSON bytes: equal only with the same types and field order."""
    return sorted(bytes(d.raw) for d in docs)


@pytest.fixture
def typed(coll):
    coll.create_index([("a", 1), ("b", 1)])
    coll.insert_many(
        [
            {"_id": 1, "a": 1, "b": "x", "c": 0},
            {"_id": 2, "a": 1.0, "b": "y", "c": 0},
            {"_id": 3, "a": Int64(1), "c": 0},
            {"_id": 4, "a": 2, "b": {"n": [1, 2]}, "c": 0},
            {"_id": 5, "b": "z", "c": 0},
        ]
    )
    return coll


def test_covered_find_returns_the_stored_types_and_leaves_missing_fields_out(db, typed):
    raw = typed.with_options(codec_options=CodecOptions(document_class=RawBSONDocument))
    projection = {"_id": 0, "a": 1, "b": 1}
    for query in [{"a": 1}, {"a": {"$gte": 1}}, {"a": {"$in": [1, 2]}, "b": {"$ne": "y"}}]:
        assert _exact(raw.find(query, projection)) == _exact(_natural(raw, query, projection))
        explained = _explain_find(db, filter=query, projection=projection)
        plan = explained["queryPlanner"]["winningPlan"]
        assert _stages(plan) == ["PROJECTION_COVERED", "IXSCAN"], query
        assert explained["executionStats"]["totalDocsExamined"] == 0
        assert explained["executionStats"]["nReturned"] == len(list(typed.find(query)))
    # The document without `b` has no `b` in the covered answer either.
    assert list(typed.find({"a": Int64(1), "b": {"$exists": False}}, projection)) == [{"a": 1}]
    assert type(next(raw.find({"a": 1, "b": None}, projection))["a"]) is Int64


def test_reading_a_field_outside_the_index_fetches(db, typed):
    for find in [
        {"filter": {"a": 1}},
        {"filter": {"a": 1}, "projection": {"a": 1}},
        {"filter": {"a": 1}, "projection": {"_id": 0, "c": 1}},
        {"filter": {"a": 1, "c": 0}, "projection": {"_id": 0, "a": 1}},
    ]:
        plan = _explain_find(db, **find)["queryPlanner"]["winningPlan"]
        assert "FETCH" in _stages(plan), find
        assert "PROJECTION_COVERED" not in _stages(plan), find


def test_an_update_keeping_the_key_changes_the_stored_value(typed):
    typed.update_one({"_id": 1}, {"$set": {"a": 1.0}})
    typed.update_one({"_id": 2}, {"$set": {"b": "w"}})
    typed.replace_one({"_id": 3}, {"a": 1, "b": "v", "c": 1})
    raw = typed.with_options(codec_options=CodecOptions(document_class=RawBSONDocument))
    projection = {"_id": 0, "a": 1, "b": 1}
    assert _exact(raw.find({"a": 1}, projection)) == _exact(_natural(raw, {"a": 1}, projection))
    assert sorted(d["b"] for d in typed.find({"a": 1}, projection)) == ["v", "w", "x"]
    typed.delete_one({"_id": 1})
    assert sorted(d["b"] for d in typed.find({"a": 1}, projection)) == ["v", "w"]


def test_a_multikey_index_never_covers(db, coll):
    coll.create_index("a")
    coll.insert_many([{"_id": 1, "a": 5}, {"_id": 2, "a": [5, 6]}])
    projection = {"_id": 0, "a": 1}
    assert sorted(map(str, coll.find({"a": 5}, projection))) == sorted(
        map(str, _natural(coll, {"a": 5}, projection))
    )
    plan = _explain_find(db, filter={"a": 5}, projection=projection)["queryPlanner"]
    assert "FETCH" in _stages(plan["winningPlan"])


def test_an_index_built_on_existing_documents_covers(db, coll):
    coll.insert_many([{"_id": i, "k": i % 5, "v": float(i)} for i in range(50)])
    coll.create_index([("k", 1), ("v", -1)])
    got = list(coll.find({"k": 3}, {"_id": 0, "v": 1}).sort("v", -1))
    assert got == [{"v": float(i)} for i in range(48, -1, -5) if i % 5 == 3]
    explained = _explain_find(db, filter={"k": 3}, projection={"_id": 0, "v": 1})
    assert explained["executionStats"]["totalDocsExamined"] == 0


def test_sorted_covered_find_with_skip_and_limit(db, coll):
    coll.create_index([("k", 1), ("v", 1)])
    coll.insert_many([{"_id": i, "k": i % 3, "v": (i * 7) % 10} for i in range(30)])
    query, projection = {"k": {"$gte": 1}}, {"_id": 0, "k": 1, "v": 1}
    got = list(coll.find(query, projection).sort([("v", -1), ("k", 1)]).skip(2).limit(5))
    want = sorted(_natural(coll, query, projection), key=lambda d: (-d["v"], d["k"]))[2:7]
    assert got == want
    # A blocking sort on a field outside the index reads the documents.
    coll.update_many({}, {"$set": {"w": 1}})
    for sort, covered in [({"v": -1}, True), ({"w": 1}, False)]:
        explained = _explain_find(db, filter=query, projection=projection, sort=sort)
        stages = _stages(explained["queryPlanner"]["winningPlan"])
        assert ("FETCH" not in stages) == covered, (sort, stages)
        assert (explained["executionStats"]["totalDocsExamined"] == 0) == covered, sort


def test_covered_count_distinct_and_aggregate(db, coll):
    coll.create_index("k")
    coll.insert_many([{"_id": i, "k": i % 4, "x": i} for i in range(40)])
    assert coll.count_documents({"k": {"$gte": 2}}) == 20
    count = db.command("explain", {"count": "c", "query": {"k": 2}}, verbosity="executionStats")
    assert _stages(count["queryPlanner"]["winningPlan"]) == ["COUNT", "IXSCAN"]
    assert count["executionStats"]["totalDocsExamined"] == 0
    assert sorted(coll.distinct("k", {"k": {"$lt": 3}})) == [0, 1, 2]
    pipeline = [{"$match": {"k": {"$in": [1, 3]}}}, {"$group": {"_id": "$k", "n": {"$sum": 1}}}]
    assert sorted((d["_id"], d["n"]) for d in coll.aggregate(pipeline)) == [(1, 10), (3, 10)]
    explained = db.command(
        "explain",
        {"aggregate": "c", "pipeline": pipeline, "cursor": {}},
        verbosity="executionStats",
    )
    cursor = explained["stages"][0]["$cursor"]
    assert _stages(cursor["queryPlanner"]["winningPlan"]) == ["IXSCAN"]
    assert cursor["executionStats"]["totalDocsExamined"] == 0


def test_a_collated_index_covers_with_the_original_strings(coll):
    collation = {"locale": "en", "strength": 2}
    coll.create_index("name", collation=collation)
    coll.insert_many(
        [{"_id": 1, "name": "ABC"}, {"_id": 2, "name": "abc"}, {"_id": 3, "name": "b"}]
    )
    got = coll.find({"name": "aBc"}, {"_id": 0, "name": 1}, collation=collation)
    assert sorted(d["name"] for d in got) == ["ABC", "abc"]


def test_the_id_index_and_hashed_indexes_do_not_cover(db, coll):
    coll.create_index([("h", "hashed")])
    coll.insert_many([{"_id": 1, "h": 5}, {"_id": 2, "h": 6}])
    for find in [
        {"filter": {"_id": 1}, "projection": {"_id": 1}},
        {"filter": {"h": 5}, "projection": {"_id": 0, "h": 1}},
        {"filter": {}, "projection": {"_id": 0}, "hint": {"_id": 1}},
    ]:
        plan = _explain_find(db, **find)["queryPlanner"]["winningPlan"]
        assert "FETCH" in _stages(plan), find
    assert list(coll.find({"h": 5}, {"_id": 0, "h": 1})) == [{"h": 5}]
    # The _id index stores no values: a count through it reads the documents.
    count = db.command(
        "explain", {"count": "c", "query": {}, "hint": {"_id": 1}}, verbosity="executionStats"
    )
    assert _stages(count["queryPlanner"]["winningPlan"]) == ["COUNT", "FETCH", "IXSCAN"]
    assert count["executionStats"]["totalDocsExamined"] == 2


def test_keys_examined_counts_the_entries_used_not_those_read_ahead(db, coll):
    coll.create_index("a")
    coll.insert_many([{"_id": i, "a": i, "b": i % 2} for i in range(1000)])
    for limit in [5, 20, 100]:
        explained = _explain_find(db, filter={"a": {"$gte": 0}}, limit=limit)
        assert explained["executionStats"]["totalKeysExamined"] == limit
        assert explained["executionStats"]["totalDocsExamined"] == limit
    explained = _explain_find(db, filter={"a": {"$gte": 0}, "b": 1}, limit=100)
    assert explained["executionStats"]["totalKeysExamined"] == 200


def test_an_index_turning_multikey_under_an_open_cursor(coll):
    """Later batches of a cursor see that the index became multikey: a document reached
    through several of its new keys comes back once (as after MongoDB's yield; a
    document changed under a cursor may still come back once more, as in MongoDB)."""
    coll.create_index("a")
    coll.insert_many([{"_id": i, "a": i} for i in range(10)])
    cursor = coll.find({"a": {"$gte": 0}}, batch_size=2)
    seen = [next(cursor)["_id"], next(cursor)["_id"]]
    coll.insert_one({"_id": 100, "a": [11, 12, 13, 14]})
    seen += [d["_id"] for d in cursor]
    assert seen.count(100) == 1
    assert sorted(seen) == [*range(10), 100]
