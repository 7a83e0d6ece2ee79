"""The query, projection, sort and update language of issue 3, family by family.

Each family is one table of cases run through pymongo against a live server: filters
select `_id`s from one shared data set, projections and updates shape one document,
and every malformed input must fail with MongoDB 7.0's error code (and, where drivers
or users read it, its message).
"""

from __future__ import annotations

import datetime

import pytest
from bson import Decimal128, Int64, ObjectId, Regex
from pymongo import (
    DeleteMany,
    DeleteOne,
    InsertOne,
    ReplaceOne,
    ReturnDocument,
    UpdateMany,
    UpdateOne,
)
from pymongo.errors import BulkWriteError, OperationFailure

NAN = float("nan")
WHEN = datetime.datetime(2024, 5, 1)

# One data set for every filter case: numbers of all four types, strings, arrays,
# embedded documents, null, missing fields and bit patterns.
DOCS = [
    {"_id": 1, "n": 1, "s": "Apple", "arr": [1, 5], "tags": ["a", "b"], "sub": {"x": 1}, "bits": 5},
    {
        "_id": 2,
        "n": 1.0,
        "s": "apple\nbanana",
        "arr": [2],
        "tags": ["b", "c"],
        "sub": {"x": 2, "y": 1},
        "bits": 10,
    },
    {
        "_id": 3,
        "n": Int64(1),
        "s": "banana",
        "arr": [],
        "tags": ["a", "b", "c"],
        "items": [{"k": 1, "v": "x"}, {"k": 2, "v": "y"}],
    },
    {"_id": 4, "n": Decimal128("1"), "s": "a.b", "arr": [[1, 2]], "items": [{"k": 1, "v": "y"}]},
    {"_id": 5, "n": "1", "s": 10, "arr": 3, "bits": -1},
    {"_id": 6, "n": None, "s": None},
    {"_id": 7},
    {"_id": 8, "n": 2.5, "s": "Cherry", "arr": [7, 8, 9]},
    {"_id": 9, "n": NAN},
    {"_id": 10, "n": Int64(-3), "dt": WHEN},
]
ALL = [d["_id"] for d in DOCS]


def but(*excluded):
    return [i for i in ALL if i not in excluded]


FILTERS = {
    "comparison": {
        "numeric equivalence": ({"n": 1}, [1, 2, 3, 4]),
        "decimal operand": ({"n": {"$eq": Decimal128("1.0")}}, [1, 2, 3, 4]),
        "long operand": ({"n": Int64(1)}, [1, 2, 3, 4]),
        "gt stays in type": ({"n": {"$gt": 1}}, [8]),
        "gte": ({"n": {"$gte": 1}}, [1, 2, 3, 4, 8]),
        "lt skips NaN": ({"n": {"$lt": 1}}, [10]),
        "NaN equals NaN": ({"n": NAN}, [9]),
        "ne": ({"n": {"$ne": 1}}, but(1, 2, 3, 4)),
        "null matches missing": ({"n": None}, [6, 7]),
        "ne null": ({"n": {"$ne": None}}, but(6, 7)),
        "string vs number": ({"n": "1"}, [5]),
        "in mixed": ({"n": {"$in": [2.5, "1"]}}, [5, 8]),
        "in with regex": ({"s": {"$in": [Regex("^app", "i"), 10]}}, [1, 2, 5]),
        "nin": ({"n": {"$nin": [1, None]}}, [5, 8, 9, 10]),
        "strings only": ({"s": {"$gt": "B"}}, [2, 3, 4, 8]),
        "numbers only": ({"s": {"$lt": 100}}, [5]),
        "date": ({"dt": {"$gte": WHEN}}, [10]),
        "embedded document": ({"sub": {"x": 1}}, [1]),
        "field order matters": ({"sub": {"y": 1, "x": 2}}, []),
        "dotted": ({"sub.x": {"$gte": 2}}, [2]),
        "array element": ({"tags": "c"}, [2, 3]),
        "whole array": ({"tags": ["a", "b"]}, [1]),
        "numeric path": ({"arr.0": 1}, [1, 4]),
        "array of documents": ({"items.k": 2}, [3]),
    },
    "logical": {
        "and": ({"$and": [{"n": 1}, {"s": "Apple"}]}, [1]),
        "or": ({"$or": [{"n": 2.5}, {"s": "banana"}]}, [3, 8]),
        "nor": ({"$nor": [{"n": {"$exists": True}}]}, [7]),
        "not": ({"n": {"$not": {"$gt": 1}}}, but(8)),
        "not regex": ({"s": {"$not": Regex("^a")}}, but(2, 4)),
        "nested": ({"$or": [{"$and": [{"n": 1}, {"bits": 5}]}, {"n": NAN}]}, [1, 9]),
    },
    "element": {
        "exists": ({"bits": {"$exists": True}}, [1, 2, 5]),
        "exists false": ({"n": {"$exists": False}}, [7]),
        "exists null value": ({"s": {"$exists": 1}}, but(7, 9, 10)),
        "type name": ({"s": {"$type": "string"}}, [1, 2, 3, 4, 8]),
        "type number": ({"s": {"$type": 2}}, [1, 2, 3, 4, 8]),
        "type alias number": ({"n": {"$type": "number"}}, [1, 2, 3, 4, 8, 9, 10]),
        "type list": ({"n": {"$type": ["long", "decimal"]}}, [3, 4, 10]),
        "type null": ({"n": {"$type": "null"}}, [6]),
        "type array": ({"arr": {"$type": "array"}}, [1, 2, 3, 4, 8]),
        "type inside array": ({"arr": {"$type": "int"}}, [1, 2, 5, 8]),
        "type date": ({"dt": {"$type": 9}}, [10]),
    },
    "regex": {
        "literal": ({"s": Regex("^apple")}, [2]),
        "i": ({"s": Regex("^apple", "i")}, [1, 2]),
        "m": ({"s": {"$regex": "^banana", "$options": "m"}}, [2, 3]),
        "s": ({"s": {"$regex": "apple.banana", "$options": "s"}}, [2]),
        "x": ({"s": {"$regex": "a p p l e  # spaced", "$options": "xi"}}, [1, 2]),
        "escaped dot": ({"s": {"$regex": r"a\.b"}}, [4]),
        "regex operand": ({"s": {"$regex": Regex("^CH", "i")}}, [8]),
    },
    "mod": {
        "remainder": ({"n": {"$mod": [2, 1]}}, [1, 2, 3, 4]),
        "negative": ({"n": {"$mod": [2, -1]}}, [10]),
        "truncates": ({"n": {"$mod": [2, 0]}}, [8]),
    },
    "array": {
        "all": ({"tags": {"$all": ["a", "b"]}}, [1, 3]),
        "all empty": ({"tags": {"$all": []}}, []),
        "all elemMatch": (
            {"items": {"$all": [{"$elemMatch": {"k": 1}}, {"$elemMatch": {"v": "y"}}]}},
            [3, 4],
        ),
        "size 0": ({"arr": {"$size": 0}}, [3]),
        "size 1": ({"arr": {"$size": 1}}, [2, 4]),
        "elemMatch values": ({"arr": {"$elemMatch": {"$gt": 4, "$lt": 8}}}, [1, 8]),
        "ranges without elemMatch": ({"arr": {"$gt": 4, "$lt": 6}}, [1]),
        "elemMatch documents": ({"items": {"$elemMatch": {"k": 1, "v": "y"}}}, [4]),
        "same fields without elemMatch": ({"items.k": 1, "items.v": "y"}, [3, 4]),
        "nested array": ({"arr": [1, 2]}, [4]),
    },
    "bitwise": {
        "all set positions": ({"bits": {"$bitsAllSet": [0, 2]}}, [1, 5]),
        "all set mask": ({"bits": {"$bitsAllSet": 5}}, [1, 5]),
        "any set": ({"bits": {"$bitsAnySet": [1]}}, [2, 5]),
        "all clear": ({"bits": {"$bitsAllClear": [0]}}, [2]),
        "any clear": ({"bits": {"$bitsAnyClear": [0, 1]}}, [1, 2]),
    },
    "expr": {
        "compares across types": ({"$expr": {"$gt": ["$n", 2]}}, [5, 8]),
        "field to field": (
            {"$expr": {"$and": [{"$isNumber": "$bits"}, {"$gt": ["$bits", 4]}]}},
            [1, 2],
        ),
        "with a path filter": ({"tags": "a", "$expr": {"$eq": [{"$size": "$tags"}, 3]}}, [3]),
    },
    "jsonSchema": {
        "required": ({"$jsonSchema": {"required": ["bits"]}}, [1, 2, 5]),
        "type of optional property": (
            {"$jsonSchema": {"properties": {"n": {"bsonType": "string"}}}},
            [5, 7],
        ),
        "number with minimum": (
            {
                "$jsonSchema": {
                    "required": ["n"],
                    "properties": {"n": {"bsonType": "number", "minimum": 1}},
                }
            },
            [1, 2, 3, 4, 8],
        ),
        "minItems": ({"$jsonSchema": {"properties": {"tags": {"minItems": 3}}}}, but(1, 2)),
        "pattern": (
            {"$jsonSchema": {"properties": {"s": {"type": "string", "pattern": "^[a-z]"}}}},
            [2, 3, 4, 7, 9, 10],
        ),
        "nested object": (
            {
                "$jsonSchema": {
                    "required": ["sub"],
                    "properties": {"sub": {"additionalProperties": False, "properties": {"x": {}}}},
                }
            },
            [1],
        ),
        "items": (
            {
                "$jsonSchema": {
                    "required": ["items"],
                    "properties": {
                        "items": {
                            "items": {"required": ["v"], "properties": {"v": {"enum": ["y"]}}}
                        }
                    },
                }
            },
            [4],
        ),
        "anyOf and not": (
            {
                "$jsonSchema": {
                    "anyOf": [{"required": ["dt"]}, {"required": ["bits"]}],
                    "not": {"required": ["sub"]},
                }
            },
            [5, 10],
        ),
        "with other operators": ({"n": 1, "$jsonSchema": {"required": ["items"]}}, [3, 4]),
    },
    "comment": {
        "ignored": ({"n": 2.5, "$comment": "why"}, [8]),
    },
}

FILTER_CASES = [
    pytest.param(filter_, expected, id=f"{family}: {name}")
    for family, cases in FILTERS.items()
    for name, (filter_, expected) in cases.items()
]


@pytest.fixture(scope="module")
def data(client):
    db = client["t_query_language_data"]
    db.drop_collection("c")
    db.c.insert_many(DOCS)
    yield db.c
    client.drop_database(db.name)


@pytest.mark.parametrize("filter_, expected", FILTER_CASES)
def test_filter(data, filter_, expected):
    assert sorted(d["_id"] for d in data.find(filter_, {"_id": 1})) == expected
    assert data.count_documents(filter_) == len(expected)


# (filter, code, message or None): malformed filters and MongoDB's replies.
FILTER_ERRORS = {
    "unknown operator": ({"n": {"$foo": 1}}, 2, "unknown operator: $foo"),
    "unknown top level": ({"$foo": 1}, 2, None),
    "empty and": ({"$and": []}, 2, "$and/$or/$nor must be a nonempty array"),
    "or of object": ({"$or": {}}, 2, None),
    "not number": ({"n": {"$not": 1}}, 2, "$not needs a regex or a document"),
    "in not array": ({"n": {"$in": 1}}, 2, "$in needs an array"),
    "type alias": ({"n": {"$type": "foo"}}, 2, "Unknown type name alias: foo"),
    "type code": ({"n": {"$type": 100}}, 2, "Invalid numerical type code: 100"),
    "regex syntax": ({"s": {"$regex": "("}}, 51091, None),
    "regex flag": (
        {"s": {"$regex": "a", "$options": "g"}},
        51108,
        "invalid flag in regex options: g",
    ),
    "options without regex": ({"s": {"$options": "i"}}, 2, "$options needs a $regex"),
    "mod zero": ({"n": {"$mod": [0, 1]}}, 2, "divisor cannot be 0"),
    "mod short": ({"n": {"$mod": [2]}}, 2, "malformed mod, not enough elements"),
    "all not array": ({"tags": {"$all": 1}}, 2, "$all needs an array"),
    "size string": ({"arr": {"$size": "x"}}, 2, "$size needs a number"),
    "elemMatch scalar": ({"arr": {"$elemMatch": 1}}, 2, "$elemMatch needs an Object"),
    "bit position": ({"bits": {"$bitsAllSet": [-1]}}, 2, None),
    "expr operator": ({"$expr": {"$bogus": 1}}, 168, None),
    "expr runtime": (
        {"$expr": {"$add": ["$s", 1]}},
        14,
        "$add only supports numeric or date types, not string",
    ),
    "schema unsupported keyword": (
        {"$jsonSchema": {"format": "date"}},
        9,
        "$jsonSchema keyword 'format' is not currently supported",
    ),
    "schema unknown keyword": (
        {"$jsonSchema": {"bogus": 1}},
        9,
        "Unknown $jsonSchema keyword: bogus",
    ),
    "schema not object": ({"$jsonSchema": 1}, 14, "$jsonSchema must be an object"),
    "schema integer type": (
        {"$jsonSchema": {"type": "integer"}},
        9,
        "$jsonSchema type 'integer' is not currently supported.",
    ),
    "schema both types": (
        {"$jsonSchema": {"type": "object", "bsonType": "object"}},
        9,
        "Cannot specify both $jsonSchema keywords 'type' and 'bsonType'",
    ),
    "schema bad required": (
        {"$jsonSchema": {"required": []}},
        9,
        "$jsonSchema keyword 'required' cannot be an empty array",
    ),
    "schema bad count": (
        {"$jsonSchema": {"properties": {"s": {"minLength": -1}}}},
        9,
        "Expected a positive number in: minLength: -1",
    ),
}


@pytest.mark.parametrize("filter_, code, message", FILTER_ERRORS.values(), ids=FILTER_ERRORS.keys())
def test_filter_error(data, filter_, code, message):
    with pytest.raises(OperationFailure) as info:
        list(data.find(filter_))
    assert info.value.code == code, info.value.details
    if message is not None:
        assert info.value.details["errmsg"] == message


PROJECTED = {
    "_id": 1,
    "a": 1,
    "b": {"c": 2, "d": 3},
    "arr": [1, 2, 3, 4, 5],
    "items": [{"k": 1, "v": "x"}, {"k": 2, "v": "y"}, {"k": 3, "v": "z"}],
}

# (projection, filter, expected document)
PROJECTIONS = {
    "inclusion": ({"a": 1}, {}, {"_id": 1, "a": 1}),
    "inclusion without _id": ({"a": 1, "_id": 0}, {}, {"a": 1}),
    "only _id excluded": ({"_id": 0}, {}, {k: v for k, v in PROJECTED.items() if k != "_id"}),
    "exclusion": ({"arr": 0, "items": 0, "b": 0}, {}, {"_id": 1, "a": 1}),
    "nested inclusion": ({"b.c": 1}, {}, {"_id": 1, "b": {"c": 2}}),
    "nested document form": ({"b": {"c": 1}}, {}, {"_id": 1, "b": {"c": 2}}),
    "nested exclusion": ({"b.d": 0, "arr": 0, "items": 0}, {}, {"_id": 1, "a": 1, "b": {"c": 2}}),
    "through arrays": ({"items.k": 1, "_id": 0}, {}, {"items": [{"k": 1}, {"k": 2}, {"k": 3}]}),
    "slice alone keeps all fields": (
        {"arr": {"$slice": 2}, "items": 0},
        {},
        {"_id": 1, "a": 1, "b": {"c": 2, "d": 3}, "arr": [1, 2]},
    ),
    "slice negative": ({"arr": {"$slice": -2}, "a": 1}, {}, {"_id": 1, "a": 1, "arr": [4, 5]}),
    "slice skip and limit": (
        {"arr": {"$slice": [1, 2]}, "a": 1, "_id": 0},
        {},
        {"a": 1, "arr": [2, 3]},
    ),
    "elemMatch": (
        {"items": {"$elemMatch": {"k": {"$gt": 1}}}, "_id": 0},
        {},
        {"items": [{"k": 2, "v": "y"}]},
    ),
    "elemMatch no match": ({"items": {"$elemMatch": {"k": 9}}, "a": 1}, {}, {"_id": 1, "a": 1}),
    "positional documents": (
        {"items.$": 1},
        {"items.k": 3},
        {"_id": 1, "items": [{"k": 3, "v": "z"}]},
    ),
    "positional values": ({"arr.$": 1, "_id": 0}, {"arr": {"$gte": 3}}, {"arr": [3]}),
    "expression": ({"total": {"$add": ["$a", "$b.c"]}, "_id": 0}, {}, {"total": 3}),
    "literal": ({"a": 1, "lit": {"$literal": 5}}, {}, {"_id": 1, "a": 1, "lit": 5}),
    "renamed field": ({"x": "$b.d", "_id": 0}, {}, {"x": 3}),
}


@pytest.mark.parametrize(
    "projection, filter_, expected", PROJECTIONS.values(), ids=PROJECTIONS.keys()
)
def test_projection(coll, projection, filter_, expected):
    coll.insert_one(PROJECTED)
    assert coll.find_one(filter_, projection) == expected


PROJECTION_ERRORS = {
    "exclusion in inclusion": (
        {"a": 1, "b": 0},
        {},
        31254,
        "Cannot do exclusion on field b in inclusion projection",
    ),
    "inclusion in exclusion": (
        {"a": 0, "b": 1},
        {},
        31253,
        "Cannot do inclusion on field b in exclusion projection",
    ),
    "path collision": ({"b": 1, "b.c": 1}, {}, 31249, "Path collision at b.c remaining portion c"),
    "two positionals": ({"arr.$": 1, "items.$": 1}, {"arr": 1, "items.k": 1}, 31276, None),
    "slice of wrong type": (
        {"arr": {"$slice": "x"}},
        {},
        31273,
        "$slice only supports numbers and [skip, limit] arrays",
    ),
    "unknown expression": ({"a": {"$bogus": 1}}, {}, 168, "Unrecognized expression '$bogus'"),
}


@pytest.mark.parametrize(
    "projection, filter_, code, message", PROJECTION_ERRORS.values(), ids=PROJECTION_ERRORS.keys()
)
def test_projection_error(coll, projection, filter_, code, message):
    coll.insert_one(PROJECTED)
    with pytest.raises(OperationFailure) as info:
        coll.find_one(filter_, projection)
    assert info.value.code == code, info.value.details
    if message is not None:
        assert info.value.details["errmsg"] == message


SORTED = [
    {"_id": 1, "v": 2, "w": 1, "p": [{"x": 1, "y": 9}, {"x": 2, "y": 0}]},
    {"_id": 2, "v": "a", "w": 2, "p": [{"x": 1, "y": 5}]},
    {"_id": 3, "v": None, "w": 1},
    {"_id": 4, "w": 2},
    {"_id": 5, "v": [0, 10], "w": 1},
    {"_id": 6, "v": {"x": 1}, "w": 2},
    {"_id": 7, "v": True, "w": 1},
    {"_id": 8, "v": 1.5, "w": 2},
    {"_id": 9, "v": [], "w": 1},
]

# (sort, skip, limit, expected _ids)
SORTS = {
    "types ascending, arrays by min": ([("v", 1), ("_id", 1)], 0, 0, [9, 3, 4, 5, 8, 1, 2, 6, 7]),
    "types descending, arrays by max": ([("v", -1), ("_id", 1)], 0, 0, [7, 6, 2, 5, 1, 8, 3, 4, 9]),
    "multi-key": ([("w", -1), ("_id", -1)], 0, 0, [8, 6, 4, 2, 9, 7, 5, 3, 1]),
    "fields through one array use one element": (
        [("p.x", 1), ("p.y", 1), ("_id", 1)],
        0,
        0,
        [3, 4, 5, 6, 7, 8, 9, 2, 1],
    ),
    "skip and limit": ([("v", 1), ("_id", 1)], 2, 3, [4, 5, 8]),
    "limit only": ([("v", -1), ("_id", 1)], 0, 2, [7, 6]),
    "natural": ([("$natural", 1)], 0, 0, [1, 2, 3, 4, 5, 6, 7, 8, 9]),
    "reverse natural": ([("$natural", -1)], 1, 2, [8, 7]),
}


@pytest.mark.parametrize("sort, skip, limit, expected", SORTS.values(), ids=SORTS.keys())
def test_sort(coll, sort, skip, limit, expected):
    coll.insert_many(SORTED)
    assert [d["_id"] for d in coll.find({}, sort=sort, skip=skip, limit=limit)] == expected


SORT_ERRORS = {
    "bad direction": ({"v": 2}, 15975),
    "bad key": ({"v": "up"}, 15974),
    "natural with others": ({"$natural": 1, "v": 1}, 2),
}


@pytest.mark.parametrize("sort, code", SORT_ERRORS.values(), ids=SORT_ERRORS.keys())
def test_sort_error(db, sort, code):
    db.c.insert_one({"v": 1})
    with pytest.raises(OperationFailure) as info:
        db.command("find", "c", sort=sort)
    assert info.value.code == code, info.value.details


def test_sort_memory_limit_and_disk_use(db):
    """A blocking sort over more than 100 MB fails unless it may spill to disk. (On an
    unindexed field: the _id index would return `{_id: -1}` in order, read backward.)"""
    big = "x" * (1024 * 1024)
    for start in range(0, 110, 10):
        db.c.insert_many([{"_id": i, "n": i, "big": big} for i in range(start, start + 10)])
    with pytest.raises(OperationFailure) as info:
        db.command("find", "c", sort={"n": -1}, projection={"big": 0}, allowDiskUse=False)
    assert info.value.code == 292
    assert info.value.details["codeName"] == "QueryExceededMemoryLimitNoDiskUseAllowed"
    assert info.value.details["errmsg"] == (
        "Executor error during find command :: caused by :: Sort exceeded memory limit of "
        "104857600 bytes, but did not opt in to external sorting."
    )
    # allowDiskUse is on by default (allowDiskUseByDefault), so the sort spills.
    spilled = [d["_id"] for d in db.c.find({}, {"big": 0}, sort=[("n", -1)])]
    assert spilled == list(range(109, -1, -1))
    # A top-k sort keeps only `limit` documents and needs no disk.
    reply = db.command(
        "find", "c", sort={"n": 1}, projection={"big": 0}, limit=3, allowDiskUse=False
    )
    assert [d["_id"] for d in reply["cursor"]["firstBatch"]] == [0, 1, 2]


# (initial document, extra filter, update, arrayFilters, expected document without _id)
UPDATES = {
    "set": ({"a": 1}, {}, {"$set": {"a": 5}}, None, {"a": 5}),
    "set nested creates": ({}, {}, {"$set": {"b.c": 1}}, None, {"b": {"c": 1}}),
    "set array index": (
        {"arr": [1, 2]},
        {},
        {"$set": {"arr.3": 9}},
        None,
        {"arr": [1, 2, None, 9]},
    ),
    "unset": ({"a": 1, "b": 2}, {}, {"$unset": {"a": ""}}, None, {"b": 2}),
    "inc": ({"a": 1}, {}, {"$inc": {"a": 2}}, None, {"a": 3}),
    "inc promotes": ({"a": 1}, {}, {"$inc": {"a": 1.5}}, None, {"a": 2.5}),
    "inc missing": ({}, {}, {"$inc": {"a": Int64(2)}}, None, {"a": 2}),
    "mul": ({"a": 2}, {}, {"$mul": {"a": 3}}, None, {"a": 6}),
    "mul missing": ({}, {}, {"$mul": {"a": 3}}, None, {"a": 0}),
    "min": ({"a": 1}, {}, {"$min": {"a": 0}}, None, {"a": 0}),
    "max keeps": ({"a": 1}, {}, {"$max": {"a": 0}}, None, {"a": 1}),
    "min across types": ({"a": 1}, {}, {"$min": {"a": None}}, None, {"a": None}),
    "rename": ({"a": 1, "b": 2}, {}, {"$rename": {"a": "z"}}, None, {"b": 2, "z": 1}),
    "rename nested": ({"a": {"b": 1}}, {}, {"$rename": {"a.b": "c"}}, None, {"a": {}, "c": 1}),
    "setOnInsert ignored": ({"a": 1}, {}, {"$setOnInsert": {"x": 1}}, None, {"a": 1}),
    "push": ({"arr": [1, 2, 3]}, {}, {"$push": {"arr": 4}}, None, {"arr": [1, 2, 3, 4]}),
    "push creates": ({}, {}, {"$push": {"arr": 4}}, None, {"arr": [4]}),
    "push each sort slice": (
        {"arr": [1, 2, 3]},
        {},
        {"$push": {"arr": {"$each": [5, 0], "$sort": 1, "$slice": 3}}},
        None,
        {"arr": [0, 1, 2]},
    ),
    "push position": (
        {"arr": [1, 2, 3]},
        {},
        {"$push": {"arr": {"$each": [9], "$position": 1}}},
        None,
        {"arr": [1, 9, 2, 3]},
    ),
    "push negative slice": (
        {"arr": [1, 2, 3]},
        {},
        {"$push": {"arr": {"$each": [4], "$slice": -2}}},
        None,
        {"arr": [3, 4]},
    ),
    "push sort documents": (
        {"arr": []},
        {},
        {"$push": {"arr": {"$each": [{"k": 1}, {"k": 2}], "$sort": {"k": -1}}}},
        None,
        {"arr": [{"k": 2}, {"k": 1}]},
    ),
    "addToSet present": (
        {"arr": [1, 2, 3]},
        {},
        {"$addToSet": {"arr": 2.0}},
        None,
        {"arr": [1, 2, 3]},
    ),
    "addToSet each": (
        {"arr": [1, 2, 3]},
        {},
        {"$addToSet": {"arr": {"$each": [3, 4, 4]}}},
        None,
        {"arr": [1, 2, 3, 4]},
    ),
    "pop last": ({"arr": [1, 2, 3]}, {}, {"$pop": {"arr": 1}}, None, {"arr": [1, 2]}),
    "pop first": ({"arr": [1, 2, 3]}, {}, {"$pop": {"arr": -1}}, None, {"arr": [2, 3]}),
    "pull condition": ({"arr": [1, 2, 3]}, {}, {"$pull": {"arr": {"$gte": 2}}}, None, {"arr": [1]}),
    "pull documents": (
        {"arr": [{"k": 1, "v": 1}, {"k": 2}]},
        {},
        {"$pull": {"arr": {"k": 1}}},
        None,
        {"arr": [{"k": 2}]},
    ),
    "pullAll": ({"arr": [1, 2, 3, 1]}, {}, {"$pullAll": {"arr": [1, 3]}}, None, {"arr": [2]}),
    "positional": (
        {"arr": [1, 2, 3]},
        {"arr": 2},
        {"$set": {"arr.$": 20}},
        None,
        {"arr": [1, 20, 3]},
    ),
    "positional in documents": (
        {"arr": [{"k": 1}, {"k": 2}]},
        {"arr.k": 2},
        {"$inc": {"arr.$.k": 10}},
        None,
        {"arr": [{"k": 1}, {"k": 12}]},
    ),
    "all positional": ({"arr": [1, 2, 3]}, {}, {"$set": {"arr.$[]": 0}}, None, {"arr": [0, 0, 0]}),
    "filtered positional": (
        {"arr": [1, 2, 3]},
        {},
        {"$inc": {"arr.$[x]": 10}},
        [{"x": {"$gt": 1}}],
        {"arr": [1, 12, 13]},
    ),
    "filtered positional documents": (
        {"arr": [{"k": 1, "n": 0}, {"k": 2, "n": 0}]},
        {},
        {"$set": {"arr.$[e].n": 5}},
        [{"e.k": 2}],
        {"arr": [{"k": 1, "n": 0}, {"k": 2, "n": 5}]},
    ),
    "nested all positional": (
        {"m": [[1, 2], [3]]},
        {},
        {"$inc": {"m.$[].$[]": 1}},
        None,
        {"m": [[2, 3], [4]]},
    ),
    "replacement": ({"a": 1, "b": 2}, {}, {"c": 3}, None, {"c": 3}),
    "pipeline": (
        {"a": 1, "b": 2},
        {},
        [{"$set": {"c": {"$add": ["$a", "$b"]}}}, {"$unset": "a"}],
        None,
        {"b": 2, "c": 3},
    ),
}


@pytest.mark.parametrize(
    "initial, filter_, update, array_filters, expected", UPDATES.values(), ids=UPDATES.keys()
)
def test_update(coll, initial, filter_, update, array_filters, expected):
    coll.insert_one({"_id": 1, **initial})
    if isinstance(update, dict) and not any(k.startswith("$") for k in update):
        result = coll.replace_one({"_id": 1, **filter_}, update)
    else:
        result = coll.update_one({"_id": 1, **filter_}, update, array_filters=array_filters)
    assert result.matched_count == 1
    assert result.modified_count == int(expected != initial)
    assert coll.find_one({"_id": 1}) == {"_id": 1, **expected}


def test_current_date(coll):
    coll.insert_one({"_id": 1})
    before = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None, microsecond=0)
    coll.update_one(
        {"_id": 1},
        {"$currentDate": {"d": True, "t": {"$type": "timestamp"}, "e": {"$type": "date"}}},
    )
    doc = coll.find_one({"_id": 1})
    assert doc["d"] >= before - datetime.timedelta(seconds=1)
    assert isinstance(doc["e"], datetime.datetime)
    assert type(doc["t"]).__name__ == "Timestamp"


# (initial document, update, arrayFilters, code)
UPDATE_ERRORS = {
    "change _id": ({"a": 1}, {"$set": {"_id": 2}}, None, 66),
    "replace _id": ({"a": 1}, {"_id": 2, "a": 1}, None, 66),
    "same path twice": ({"a": 1}, {"$set": {"a": 1}, "$inc": {"a": 1}}, None, 40),
    "prefix paths": ({"a": {"b": 1}}, {"$set": {"a.b": 1, "a": 1}}, None, 40),
    "all positional and index": ({"arr": [1, 2]}, {"$set": {"arr.$[]": 1, "arr.0": 2}}, None, 40),
    "inc by string": ({"a": 1}, {"$inc": {"a": "x"}}, None, 14),
    "inc a string": ({"s": "x"}, {"$inc": {"s": 1}}, None, 14),
    "push to non-array": ({"s": "x"}, {"$push": {"s": 1}}, None, 2),
    "path through scalar": ({"s": "x"}, {"$set": {"s.x": 1}}, None, 28),
    "rename to itself": ({"a": 1}, {"$rename": {"a": "a"}}, None, 2),
    "unknown operator": ({"a": 1}, {"$foo": {"a": 1}}, None, 9),
    "missing array filter": ({"arr": [1]}, {"$set": {"arr.$[y]": 1}}, None, 2),
    "unused array filter": ({"arr": [1]}, {"$set": {"arr.$[y]": 1}}, [{"y": 1}, {"z": 1}], 9),
    "pop by two": ({"arr": [1]}, {"$pop": {"arr": 2}}, None, 9),
    "positional without match": ({"arr": [1]}, {"$set": {"arr.$": 1}}, None, 2),
    "empty operator": ({"a": 1}, {"$set": {}}, None, 9),
}


@pytest.mark.parametrize(
    "initial, update, array_filters, code", UPDATE_ERRORS.values(), ids=UPDATE_ERRORS.keys()
)
def test_update_error(db, initial, update, array_filters, code):
    db.c.insert_one({"_id": 1, **initial})
    statement = {"q": {"_id": 1}, "u": update}
    if array_filters is not None:
        statement["arrayFilters"] = array_filters
    reply = db.command("update", "c", updates=[statement])
    assert reply["n"] == 0 and reply["nModified"] == 0
    [error] = reply["writeErrors"]
    assert error["code"] == code, error
    assert db.c.find_one({"_id": 1}) == {"_id": 1, **initial}


def test_update_error_wording(db):
    db.c.insert_one({"_id": 1, "a": {"b": 1}, "s": "x"})
    cases = [
        (
            {"$set": {"_id": 2}},
            "Performing an update on the path '_id' would modify the immutable field '_id'",
        ),
        ({"$set": {"a.b": 1, "a": 1}}, "Updating the path 'a' would create a conflict at 'a'"),
        (
            {"$inc": {"s": 1}},
            "Cannot apply $inc to a value of non-numeric type. {_id: 1} has the field 's' of "
            "non-numeric type string",
        ),
    ]
    for update, message in cases:
        reply = db.command("update", "c", updates=[{"q": {"_id": 1}, "u": update}])
        assert reply["writeErrors"][0]["errmsg"] == message


# (filter, update, expected upserted document without _id, expected _id or None)
UPSERTS = {
    "equalities seed": (
        {"a": 1, "b.c": 2, "d": {"$gt": 3}},
        {"$set": {"e": 1}},
        {"a": 1, "b": {"c": 2}, "e": 1},
        None,
    ),
    "and seeds": (
        {"$and": [{"a": 1}, {"b": {"$eq": 2}}]},
        {"$inc": {"n": 1}},
        {"a": 1, "b": 2, "n": 1},
        None,
    ),
    "setOnInsert applies": ({"a": 1}, {"$setOnInsert": {"x": 1}}, {"a": 1, "x": 1}, None),
    "_id from query": ({"_id": 5}, {"$set": {"a": 1}}, {"a": 1}, 5),
    "replacement ignores query": ({"a": 1}, {"b": 2}, {"b": 2}, None),
    "in with one value seeds": ({"a": {"$in": [7]}}, {"$set": {"x": 1}}, {"a": 7, "x": 1}, None),
}


@pytest.mark.parametrize(
    "filter_, update, expected, expected_id", UPSERTS.values(), ids=UPSERTS.keys()
)
def test_upsert(coll, filter_, update, expected, expected_id):
    if any(k.startswith("$") for k in update):
        result = coll.update_one(filter_, update, upsert=True)
    else:
        result = coll.replace_one(filter_, update, upsert=True)
    assert result.matched_count == 0 and result.modified_count == 0
    upserted = result.upserted_id
    assert upserted is not None
    if expected_id is None:
        assert isinstance(upserted, ObjectId)
    else:
        assert upserted == expected_id
    doc = coll.find_one({"_id": upserted})
    assert {k: v for k, v in doc.items() if k != "_id"} == expected


def test_upsert_conflicting_seed(coll):
    with pytest.raises(OperationFailure) as info:
        coll.update_one({"a": 1}, {"$set": {"a.b": 2}}, upsert=True)
    assert info.value.code == 28, info.value.details


def test_write_command_counts(db):
    db.c.insert_many([{"_id": i, "x": int(i == 1)} for i in range(3)])
    reply = db.command(
        "update",
        "c",
        updates=[
            {"q": {}, "u": {"$set": {"x": 1}}, "multi": True},
            {"q": {"_id": 9}, "u": {"$set": {"x": 2}}, "upsert": True},
            {"q": {"_id": 0}, "u": {"$set": {"x": 1}}},
        ],
    )
    assert reply["n"] == 5
    assert reply["nModified"] == 2
    assert reply["upserted"] == [{"index": 1, "_id": 9}]
    reply = db.command(
        "delete", "c", deletes=[{"q": {"x": 1}, "limit": 1}, {"q": {"x": 2}, "limit": 0}]
    )
    assert reply["n"] == 2
    assert db.c.count_documents({}) == 2


@pytest.mark.parametrize(
    "ordered, n, indexes", [(True, 1, [1]), (False, 2, [1, 3])], ids=["ordered", "unordered"]
)
def test_per_statement_errors(db, ordered, n, indexes):
    db.c.insert_many([{"_id": 1, "s": "x"}, {"_id": 2, "s": "y"}])
    updates = [
        {"q": {"_id": 1}, "u": {"$set": {"t": 1}}},
        {"q": {"_id": 1}, "u": {"$inc": {"s": 1}}},
        {"q": {"_id": 2}, "u": {"$set": {"t": 1}}},
        {"q": {"_id": 2}, "u": {"$set": {"_id": 3}}},
    ]
    reply = db.command("update", "c", updates=updates, ordered=ordered)
    assert reply["n"] == n and reply["nModified"] == n
    assert [e["index"] for e in reply["writeErrors"]] == indexes
    assert db.c.count_documents({"t": 1}) == n


FIND_AND_MODIFY = {
    "returns the old document": (
        dict(update={"$inc": {"n": 1}}),
        {"_id": 1, "n": 1},
        {"_id": 1, "n": 2},
    ),
    "returns the new document": (
        dict(update={"$inc": {"n": 1}}, new=True),
        {"_id": 1, "n": 2},
        {"_id": 1, "n": 2},
    ),
    "sort picks the document": (
        dict(query={}, sort={"n": -1}, update={"$set": {"top": True}}, new=True),
        {"_id": 2, "n": 5, "a": [1, 2, 3], "top": True},
        {"_id": 1, "n": 1},
    ),
    "fields project the reply": (
        dict(update={"$inc": {"n": 1}}, fields={"n": 0}),
        {"_id": 1},
        {"_id": 1, "n": 2},
    ),
    "remove": (dict(remove=True), {"_id": 1, "n": 1}, None),
    "upsert new": (
        dict(query={"_id": 7}, update={"$set": {"n": 7}}, upsert=True, new=True),
        {"_id": 7, "n": 7},
        {"_id": 1, "n": 1},
    ),
    "upsert old is null": (
        dict(query={"_id": 7}, update={"$set": {"n": 7}}, upsert=True),
        None,
        {"_id": 1, "n": 1},
    ),
    "array filters": (
        dict(
            query={"_id": 2},
            update={"$set": {"a.$[x]": 0}},
            arrayFilters=[{"x": {"$gt": 1}}],
            new=True,
            fields={"a": 1},
        ),
        {"_id": 2, "a": [1, 0, 0]},
        {"_id": 1, "n": 1},
    ),
    "pipeline update": (
        dict(update=[{"$set": {"m": {"$multiply": ["$n", 10]}}}], new=True),
        {"_id": 1, "n": 1, "m": 10},
        {"_id": 1, "n": 1, "m": 10},
    ),
    "let variables": (
        dict(
            query={"$expr": {"$eq": ["$_id", "$$target"]}},
            update=[{"$set": {"hit": "$$target"}}],
            let={"target": 1},
            new=True,
        ),
        {"_id": 1, "n": 1, "hit": 1},
        {"_id": 1, "n": 1, "hit": 1},
    ),
}


@pytest.mark.parametrize(
    "options, value, after", FIND_AND_MODIFY.values(), ids=FIND_AND_MODIFY.keys()
)
def test_find_and_modify(db, options, value, after):
    db.c.insert_many([{"_id": 1, "n": 1}, {"_id": 2, "n": 5, "a": [1, 2, 3]}])
    options = {"query": {"_id": 1}, **options}
    reply = db.command("findAndModify", "c", **options)
    assert reply["value"] == value
    assert db.c.find_one({"_id": 1}) == after


def test_find_and_modify_errors(db):
    db.c.insert_one({"_id": 1})
    for options, code in [
        (dict(query={}, remove=True, update={"$set": {"a": 1}}), 9),
        (dict(query={}, remove=True, new=True), 9),
        (dict(query={}), 9),
        (dict(query={}, update={"$set": {"_id": 2}}), 66),
    ]:
        with pytest.raises(OperationFailure) as info:
            db.command("findAndModify", "c", **options)
        assert info.value.code == code, (options, info.value.details)


def test_driver_helpers(coll):
    coll.insert_many([{"_id": i, "n": i} for i in range(3)])
    assert coll.find_one_and_update(
        {"n": {"$gte": 1}},
        {"$inc": {"n": 10}},
        sort=[("n", -1)],
        return_document=ReturnDocument.AFTER,
    ) == {"_id": 2, "n": 12}
    assert coll.find_one_and_replace({"_id": 0}, {"r": 1}, projection={"_id": 0}) == {"n": 0}
    assert coll.find_one_and_delete({"_id": 1}) == {"_id": 1, "n": 1}
    assert sorted(coll.distinct("n")) == [12]


def test_bulk_write(coll):
    coll.insert_many([{"_id": i, "n": i} for i in range(4)])
    result = coll.bulk_write(
        [
            InsertOne({"_id": 10, "n": 10}),
            UpdateOne({"_id": 0}, {"$set": {"n": 100}}),
            UpdateMany({"n": {"$lt": 3}}, {"$inc": {"n": 1}}),
            ReplaceOne({"_id": 3}, {"n": 30}),
            UpdateOne({"_id": 20}, {"$set": {"n": 20}}, upsert=True),
            DeleteOne({"_id": 10}),
            DeleteMany({"n": {"$gte": 100}}),
        ]
    )
    assert result.inserted_count == 1
    assert result.matched_count == 1 + 2 + 1
    assert result.modified_count == 1 + 2 + 1
    assert result.upserted_ids == {4: 20}
    assert result.deleted_count == 2
    assert sorted((d["_id"], d["n"]) for d in coll.find()) == [(1, 2), (2, 3), (3, 30), (20, 20)]


def test_bulk_write_errors(coll):
    coll.insert_one({"_id": 1, "s": "x"})
    with pytest.raises(BulkWriteError) as info:
        coll.bulk_write(
            [
                UpdateOne({"_id": 1}, {"$inc": {"s": 1}}),
                InsertOne({"_id": 1}),
                InsertOne({"_id": 2}),
            ],
            ordered=False,
        )
    details = info.value.details
    assert [(e["index"], e["code"]) for e in details["writeErrors"]] == [(0, 14), (1, 11000)]
    assert details["nInserted"] == 1
    assert details["nModified"] == 0
