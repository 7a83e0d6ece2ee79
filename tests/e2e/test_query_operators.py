"""Query operators and their MongoDB semantics on awkward data.

The data mixes numeric types, arrays, nulls and missing fields, because that is where
matchers go wrong: an array matches if any element does, null matches a missing
field, 2 == 2.0 == NumberLong(2), and comparisons never cross type brackets.
"""

from __future__ import annotations

import pytest
from bson import Int64

from helpers import ids

DOCS = [
    {"_id": 1, "a": 1, "s": "x", "arr": [1, 2]},
    {"_id": 2, "a": 2, "s": "y", "arr": [2, 3]},
    {"_id": 3, "a": Int64(3), "arr": []},
    {"_id": 4, "a": None},
    {"_id": 5},
    {"_id": 6, "a": 2.5, "s": "x"},
    {"_id": 7, "a": [1, 5]},
    {"_id": 8, "a": "2"},
]

CASES = {
    "implicit eq": ({"a": 2}, [2]),
    "eq double matches int": ({"a": 2.0}, [2]),
    "eq int matches long": ({"a": 3}, [3]),
    "$eq array element": ({"a": {"$eq": 1}}, [1, 7]),
    "$eq string is not a number": ({"a": "2"}, [8]),
    "$ne": ({"a": {"$ne": 2}}, [1, 3, 4, 5, 6, 7, 8]),
    "$gt": ({"a": {"$gt": 2}}, [3, 6, 7]),
    "$gte": ({"a": {"$gte": 2}}, [2, 3, 6, 7]),
    "$lt": ({"a": {"$lt": 2}}, [1, 7]),
    "$lte": ({"a": {"$lte": 2}}, [1, 2, 7]),
    "range on array elements": ({"a": {"$gt": 1, "$lt": 3}}, [2, 6, 7]),
    "no cross-type comparison": ({"a": {"$gt": "1"}}, [8]),
    "$in": ({"a": {"$in": [1, 3]}}, [1, 3, 7]),
    "$in null matches missing": ({"a": {"$in": [None]}}, [4, 5]),
    "$nin": ({"a": {"$nin": [1, 3]}}, [2, 4, 5, 6, 8]),
    "$and": ({"$and": [{"a": {"$gte": 2}}, {"s": "x"}]}, [6]),
    "$or": ({"$or": [{"a": 1}, {"s": "y"}]}, [1, 2, 7]),
    "$exists true": ({"a": {"$exists": True}}, [1, 2, 3, 4, 6, 7, 8]),
    "$exists false": ({"a": {"$exists": False}}, [5]),
    "null matches null and missing": ({"a": None}, [4, 5]),
    "string range": ({"s": {"$gte": "x"}}, [1, 2, 6]),
    "array contains": ({"arr": 2}, [1, 2]),
    "empty array": ({"arr": []}, [3]),
    "whole array": ({"arr": [2, 3]}, [2]),
    "missing field": ({"nope": {"$exists": True}}, []),
}


@pytest.mark.parametrize("filter_, expected", CASES.values(), ids=CASES.keys())
def test_query_operator(coll, filter_, expected):
    coll.insert_many(DOCS)
    assert ids(coll.find(filter_).sort("_id", 1)) == expected
    assert coll.count_documents(filter_) == len(expected)
