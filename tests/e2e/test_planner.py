"""The plan cache through pymongo: queries of one shape reuse the planner's choice with
their own values, and index changes (drop, re-create under the same name with another
key, collMod, an index turning multikey) never leave a cached choice answering wrongly.
Each query is checked against the same query hinted to a collection scan.
"""

from __future__ import annotations

import pytest


def _ids(cursor):
    return [d["_id"] for d in cursor]


def _check(coll, query, sort=None):
    """The query's answer equals a collection scan's (in order when sorted)."""
    natural = coll.find(query).hint({"$natural": 1})
    got = coll.find(query)
    if sort:
        natural, got = natural.sort(sort), got.sort(sort)
        assert _ids(got) == _ids(natural), query
    else:
        assert sorted(_ids(got)) == sorted(_ids(natural)), query


@pytest.fixture
def filled(coll):
    coll.insert_many([{"_id": i, "a": i % 10, "b": i % 7, "c": i} for i in range(200)])
    return coll


def test_one_shape_with_many_values(filled):
    filled.create_index("a")
    for a in range(12):
        _check(filled, {"a": a, "b": {"$gt": a % 7}})
        _check(filled, {"a": {"$in": [a, a + 1]}}, sort=[("a", -1), ("_id", 1)])


def test_index_changes_under_a_cached_shape(db, filled):
    shape = [{"a": v} for v in (1, 2, 3)]
    filled.create_index("a", name="idx")
    for query in shape:
        _check(filled, query)
    # Same name, other key: a choice naming "idx" must not scan the new index for `a`.
    filled.drop_index("idx")
    filled.create_index("b", name="idx")
    for query in shape:
        _check(filled, query)
    # A partial index serves only the values that imply its filter.
    filled.drop_index("idx")
    filled.create_index("a", name="idx", partialFilterExpression={"c": {"$gt": 100}})
    for c in (100, 50, 150):
        _check(filled, {"a": 3, "c": {"$gt": c}})
    filled.drop_index("idx")
    # An index turning multikey: bounds on one field are no longer intersected.
    filled.create_index("a")
    _check(filled, {"a": {"$gt": 2, "$lt": 5}})
    filled.insert_one({"_id": 1000, "a": [1, 9]})
    _check(filled, {"a": {"$gt": 2, "$lt": 5}})
    # collMod and a dropped collection leave nothing stale behind either.
    filled.create_index("c", expireAfterSeconds=3600)
    db.command("collMod", "c", index={"keyPattern": {"c": 1}, "expireAfterSeconds": 60})
    _check(filled, {"c": {"$gte": 150}})
    filled.drop()
    filled.insert_many([{"_id": i, "a": i % 3} for i in range(30)])
    _check(filled, {"a": 1})


def test_sorted_shapes_keep_their_direction(filled):
    filled.create_index([("a", 1), ("c", 1)])
    for low in (0, 3, 6):
        _check(filled, {"a": {"$gte": low}}, sort=[("a", -1), ("c", -1)])
        _check(filled, {"a": {"$gte": low}}, sort=[("a", 1), ("c", 1)])
        _check(filled, {"a": low}, sort=[("c", -1)])
