"""Update operators $set, $unset, $inc and $push, including their type rules and errors.

Each case applies one update to one document and compares the stored result
exactly: field order, numeric types (an int32 $inc'd by an int64 becomes an int64)
and created intermediate documents all show up in what applications read back.
"""

from __future__ import annotations

import pytest
from bson import Int64

from helpers import raises_code

START = {"_id": 1, "n": 1, "f": 1.5, "s": "text", "arr": [1, 2], "sub": {"x": 1}}

CASES = {
    "$set new field": ({"$set": {"z": 0}}, {**START, "z": 0}),
    "$set existing keeps position": ({"$set": {"n": "one"}}, {**START, "n": "one"}),
    "$set dotted creates documents": ({"$set": {"p.q.r": 1}}, {**START, "p": {"q": {"r": 1}}}),
    "$set into subdocument": ({"$set": {"sub.y": 2}}, {**START, "sub": {"x": 1, "y": 2}}),
    "$set array element": ({"$set": {"arr.1": 9}}, {**START, "arr": [1, 9]}),
    "$unset": ({"$unset": {"s": "", "sub.x": ""}}, {"_id": 1, "n": 1, "f": 1.5, "arr": [1, 2], "sub": {}}),
    "$unset missing is a no-op": ({"$unset": {"nope": ""}}, START),
    "$inc int": ({"$inc": {"n": 2}}, {**START, "n": 3}),
    "$inc double": ({"$inc": {"f": 1}}, {**START, "f": 2.5}),
    "$inc negative": ({"$inc": {"n": -5}}, {**START, "n": -4}),
    "$inc missing creates": ({"$inc": {"m": 4}}, {**START, "m": 4}),
    "$inc int by long gives long": ({"$inc": {"n": Int64(1)}}, {**START, "n": Int64(2)}),
    "$push": ({"$push": {"arr": 3}}, {**START, "arr": [1, 2, 3]}),
    "$push document": ({"$push": {"arr": {"k": 1}}}, {**START, "arr": [1, 2, {"k": 1}]}),
    "$push missing creates array": ({"$push": {"new": "a"}}, {**START, "new": ["a"]}),
    "$push $each": ({"$push": {"arr": {"$each": [3, 4]}}}, {**START, "arr": [1, 2, 3, 4]}),
    "several operators": ({"$set": {"s": "t"}, "$inc": {"n": 1}, "$unset": {"sub": ""}}, {"_id": 1, "n": 2, "f": 1.5, "s": "t", "arr": [1, 2]}),
}  # fmt: skip


@pytest.mark.parametrize("update, expected", CASES.values(), ids=CASES.keys())
def test_update_operator(coll, update, expected):
    coll.insert_one(START)
    coll.update_one({"_id": 1}, update)
    stored = coll.find_one()
    assert stored == expected
    assert list(stored) == list(expected)  # field order
    assert {k: type(v) for k, v in stored.items()} == {k: type(v) for k, v in expected.items()}


ERRORS = {
    "$inc on a string": ({"$inc": {"s": 1}}, "TypeMismatch"),
    "$push onto a non-array": ({"$push": {"n": 1}}, "BadValue"),
    "unknown operator": ({"$frobnicate": {"n": 1}}, "FailedToParse"),
    "$set on _id": ({"$set": {"_id": 2}}, "ImmutableField"),
}


@pytest.mark.parametrize("update, code_name", ERRORS.values(), ids=ERRORS.keys())
def test_update_operator_errors(coll, update, code_name):
    coll.insert_one(START)
    with raises_code(code_name):
        coll.update_one({"_id": 1}, update)
    assert coll.find_one() == START
