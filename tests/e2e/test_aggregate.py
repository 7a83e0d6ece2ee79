"""Aggregation pipelines with the common stages, and the errors for bad pipelines.

Expected results are computed here in plain Python from the same data, so each case
states what the pipeline means rather than a pasted server answer.
"""

from __future__ import annotations

import struct
import uuid
from collections import defaultdict

import bson
import pytest
from bson import Binary
from pymongo.errors import OperationFailure

from helpers import raises_code

SALES = [
    {"_id": i, "item": item, "qty": qty, "price": price, "region": region}
    for i, (item, qty, price, region) in enumerate(
        [
            ("apple", 5, 2, "north"),
            ("pear", 3, 4, "south"),
            ("apple", 7, 2, "south"),
            ("plum", 1, 8, "north"),
            ("pear", 9, 4, "north"),
            ("apple", 2, 3, "east"),
            ("plum", 6, 8, "east"),
            ("fig", 4, 5, "south"),
        ]
    )
]


def _group_by_item() -> list[dict]:
    groups = defaultdict(list)
    for sale in SALES:
        groups[sale["item"]].append(sale)
    return [
        {
            "_id": item,
            "total": sum(s["qty"] for s in sales),
            "count": len(sales),
            "avgQty": sum(s["qty"] for s in sales) / len(sales),
            "minPrice": min(s["price"] for s in sales),
            "maxQty": max(s["qty"] for s in sales),
        }
        for item, sales in sorted(groups.items())
    ]


CASES = {
    "$match": ([{"$match": {"region": "north"}}], [s for s in SALES if s["region"] == "north"]),
    "$group with accumulators": (
        [
            {"$group": {
                "_id": "$item", "total": {"$sum": "$qty"}, "count": {"$sum": 1},
                "avgQty": {"$avg": "$qty"}, "minPrice": {"$min": "$price"}, "maxQty": {"$max": "$qty"},
            }},
            {"$sort": {"_id": 1}},
        ],
        _group_by_item(),
    ),
    "$group all": ([{"$group": {"_id": None, "qty": {"$sum": "$qty"}}}], [{"_id": None, "qty": sum(s["qty"] for s in SALES)}]),
    "$sort $skip $limit": (
        [{"$sort": {"qty": -1}}, {"$skip": 2}, {"$limit": 3}],
        sorted(SALES, key=lambda s: -s["qty"])[2:5],
    ),
    "$project computed": (
        [{"$match": {"item": "pear"}}, {"$project": {"_id": 0, "item": 1, "value": {"$multiply": ["$qty", "$price"]}}}],
        [{"item": "pear", "value": s["qty"] * s["price"]} for s in SALES if s["item"] == "pear"],
    ),
    "$project exclusion": ([{"$match": {"_id": 0}}, {"$project": {"price": 0, "region": 0}}], [{"_id": 0, "item": "apple", "qty": 5}]),
    "$count": ([{"$match": {"qty": {"$gte": 5}}}, {"$count": "n"}], [{"n": sum(1 for s in SALES if s["qty"] >= 5)}]),
    "$count of nothing is no document": ([{"$match": {"qty": 100}}, {"$count": "n"}], []),
    "$match after $group": (
        [{"$group": {"_id": "$region", "n": {"$sum": 1}}}, {"$match": {"n": {"$gte": 3}}}, {"$sort": {"_id": 1}}],
        [{"_id": "north", "n": 3}, {"_id": "south", "n": 3}],
    ),
}  # fmt: skip


@pytest.mark.parametrize("pipeline, expected", CASES.values(), ids=CASES.keys())
def test_pipeline(coll, pipeline, expected):
    coll.insert_many(SALES)
    assert list(coll.aggregate(pipeline)) == expected


def test_aggregate_on_missing_collection_is_empty(db):
    assert list(db["missing"].aggregate([{"$match": {}}])) == []


ERRORS = {
    "unknown stage": ([{"$frobnicate": {}}], "Location40324"),
    "unknown accumulator": ([{"$group": {"_id": None, "x": {"$frobnicate": 1}}}], "Location15952"),
    "group without _id": ([{"$group": {"x": {"$sum": 1}}}], "Location15955"),
}


@pytest.mark.parametrize("pipeline, code_name", ERRORS.values(), ids=ERRORS.keys())
def test_pipeline_errors(coll, pipeline, code_name):
    coll.insert_one({"_id": 1})
    with raises_code(code_name):
        list(coll.aggregate(pipeline))


def test_aggregate_requires_cursor_option(db):
    db["c"].insert_one({"_id": 1})
    with raises_code("FailedToParse"):
        db.command("aggregate", "c", pipeline=[])


def test_sort_stage_memory_limit_spill_and_top_k(db):
    """$sort holds 100 MB: beyond it, it spills (allowDiskUse defaults to true) or fails
    with 292; a $limit right after it keeps only that many documents. (The sort key has
    no index, which would provide the order without sorting.)"""
    big = "x" * (1024 * 1024)
    for start in range(0, 110, 10):
        db.c.insert_many([{"_id": i, "k": -i, "big": big} for i in range(start, start + 10)])
    pipeline = [{"$sort": {"k": 1}}, {"$project": {"big": 0, "k": 0}}]
    with raises_code("QueryExceededMemoryLimitNoDiskUseAllowed"):
        list(db.c.aggregate(pipeline, allowDiskUse=False))
    assert [d["_id"] for d in db.c.aggregate(pipeline)] == list(range(109, -1, -1))
    top = [{"$sort": {"k": 1}}, {"$limit": 2}, {"$project": {"big": 0, "k": 0}}]
    assert list(db.c.aggregate(top, allowDiskUse=False)) == [{"_id": 109}, {"_id": 108}]


def test_sort_provided_by_an_index_matches_the_blocking_sort(db):
    """A $sort an index provides is dropped from the pipeline; the order must be the
    same as the blocking sort's, across types, missing fields and duplicates."""
    values = [3, "b", None, 1.5, {"x": 1}, "a", 3, 2, True, [], -1]
    docs = [{"_id": i, "a": v} for i, v in enumerate(values)] + [{"_id": 99}]
    db.indexed.insert_many(docs)
    db.indexed.create_index("a")
    db.plain.insert_many(docs)
    for pipeline in (
        [{"$sort": {"a": 1, "_id": 1}}],
        [{"$match": {"a": {"$gte": 2}}}, {"$sort": {"a": 1}}, {"$limit": 3}],
        [{"$sort": {"a": 1}}, {"$group": {"_id": None, "order": {"$push": "$_id"}}}],
    ):
        assert list(db.indexed.aggregate(pipeline)) == list(db.plain.aggregate(pipeline))


def test_pass_through_pipelines_read_as_find_give_the_row_engines_results(db):
    """A pipeline that only matches, windows and includes or excludes stored fields is
    read as a find (stored bytes handed out); its results must be those of the same
    pipeline run through the stages, and of the equivalent find: field order, nested
    arrays, numeric types and the _id-range partitions the Spark connector sends."""
    docs = [
        {
            "_id": i,
            "n": i % 7 if i % 3 else float(i),
            "s": "Ab"[i % 2] + str(i),
            "a": [{"b": i, "c": -i}, {"b": i + 1}] if i % 4 else {"b": i, "c": 1},
            "big": bson.Int64(i) << 40,
        }
        for i in range(300)
    ]
    db.c.insert_many(docs)
    # The same pipeline with a stage after it that the row engine must run.
    row_engine = [{"$set": {"_zz": 1}}, {"$unset": "_zz"}]
    cases = [
        ([], {}),
        ([{"$match": {"_id": {"$lt": 75}}}], {}),
        ([{"$match": {"_id": {"$gte": 75, "$lt": 150}}}], {}),
        ([{"$match": {"_id": {"$gte": 225}}}], {}),
        ([{"$match": {"n": {"$gt": 2}}}, {"$skip": 5}, {"$limit": 40}], {}),
        ([{"$limit": 50}, {"$skip": 45}], {}),
        ([{"$match": {"s": "a1"}}], {"collation": {"locale": "en", "strength": 2}}),
        ([{"$match": {"n": 3}}, {"$project": {"a.b": 1, "s": 1}}], {}),
        ([{"$project": {"_id": 0, "a": {"c": True}}}, {"$limit": 20}], {}),
        ([{"$unset": ["a.c", "big"]}, {"$skip": 290}], {}),
        ([{"$match": {"_id": {"$gte": 10}}}, {"$sort": {"_id": -1}}, {"$limit": 5}], {}),
        ([{"$match": {"_id": {"$gte": 10}}}], {"hint": {"$natural": 1}}),
    ]
    for pipeline, options in cases:
        passed = list(db.c.aggregate(pipeline, batchSize=7, **options))
        computed = list(db.c.aggregate(pipeline + row_engine, batchSize=7, **options))
        assert passed == computed, pipeline
        assert [list(d) for d in passed] == [list(d) for d in computed], pipeline
    # The Spark connector's partitions together read every document once, in _id order.
    partitions = [{"$lt": 75}, {"$gte": 75, "$lt": 150}, {"$gte": 150, "$lt": 225}, {"$gte": 225}]
    read = [d for bounds in partitions for d in db.c.aggregate([{"$match": {"_id": bounds}}])]
    assert read == docs
    assert list(db.c.aggregate([{"$skip": 298}])) == list(db.c.find({}, skip=298))
    assert list(db.c.aggregate([{"$limit": 5}, {"$skip": 5}])) == []


def test_a_result_over_16_mb_is_refused(db):
    big = "x" * (1024 * 1024)
    db.c.insert_many([{"_id": i, "big": big} for i in range(20)])
    with raises_code("BSONObjectTooLarge"):
        list(db.c.aggregate([{"$group": {"_id": None, "all": {"$push": "$big"}}}]))
    # Within the limit it is fine.
    out = list(db.c.aggregate([{"$limit": 10}, {"$group": {"_id": None, "n": {"$push": "$_id"}}}]))
    assert out == [{"_id": None, "n": list(range(10))}]


SET_AND_ARRAY_EXPRESSIONS = {
    "setUnion": ({"$setUnion": ["$a", "$b"]}, [1, 2, 3, 4]),
    "setIntersection": ({"$setIntersection": ["$a", "$b"]}, [2, 3]),
    "setDifference": ({"$setDifference": ["$a", "$b"]}, [1]),
    "setEquals": ({"$setEquals": ["$a", [3, 2, 1, 1]]}, True),
    "setIsSubset": ({"$setIsSubset": [[2], "$a"]}, True),
    "anyElementTrue": ({"$anyElementTrue": [[0, None, 5]]}, True),
    "allElementsTrue": ({"$allElementsTrue": [[1, 0]]}, False),
    "zip": ({"$zip": {"inputs": ["$a", "$b"]}}, [[1, 2], [2, 3], [3, 4]]),
    "sortArray": ({"$sortArray": {"input": "$b", "sortBy": -1}}, [4, 3, 2]),
}


@pytest.mark.parametrize(
    "expression, expected",
    SET_AND_ARRAY_EXPRESSIONS.values(),
    ids=SET_AND_ARRAY_EXPRESSIONS.keys(),
)
def test_set_and_array_expressions(db, expression, expected):
    db.c.insert_one({"_id": 1, "a": [1, 2, 3, 2], "b": [2, 3, 4]})
    out = list(db.c.aggregate([{"$project": {"_id": 0, "r": expression}}]))
    assert out == [{"r": expected}]


def test_set_operator_errors(db):
    db.c.insert_one({"_id": 1, "a": [1], "s": "x"})
    for expression, code in [
        ({"$setUnion": ["$a", "$s"]}, 17043),
        ({"$setIsSubset": ["$a", "$nope"]}, 17042),
        ({"$setEquals": ["$a"]}, 17045),
        ({"$zip": {"inputs": ["$s"]}}, 34468),
    ]:
        with pytest.raises(OperationFailure) as info:
            list(db.c.aggregate([{"$project": {"r": expression}}]))
        assert info.value.code == code, expression


def test_convert_to_and_from_bin_data(db):
    """MongoDB 8.0's $convert between binData and strings (`format`) and numbers
    (`byteOrder`), with its errors; $toString writes a UUID as text, other bytes as
    base64."""
    key = uuid.UUID("01020304-0506-0708-090a-0b0c0d0e0f10")
    db.c.insert_one({"_id": 1, "u": Binary.from_uuid(key), "h": Binary(b"hello"), "n": 42})

    def project(expression):
        return list(db.c.aggregate([{"$project": {"_id": 0, "r": expression}}]))[0]["r"]

    def convert(input, to, **options):
        return project({"$convert": {"input": input, "to": to, **options}})

    assert project({"$toString": "$u"}) == str(key)
    assert project({"$toString": "$h"}) == "aGVsbG8="
    assert convert("$h", "string", format="hex") == "68656C6C6F"
    assert convert("$h", "string", format="base64url") == "aGVsbG8"
    assert convert("aGVsbG8=", "binData", format="base64") == b"hello"
    assert convert(str(key), {"type": "binData", "subtype": 4}, format="uuid") == Binary(
        key.bytes, 4
    )
    assert convert("$n", "binData", byteOrder="big") == struct.pack(">i", 42)
    assert convert(Binary(struct.pack("<q", 7)), "long") == 7
    assert convert(Binary(b"\x01\x02\x03"), "int", onError="caught") == "caught"
    for options, code in [
        ({"input": "$h", "to": "string"}, 4341115),
        ({"input": "$h", "to": "string", "format": "xml"}, 4341125),
        ({"input": "$n", "to": "binData", "byteOrder": "middle"}, 9130002),
        ({"input": "$n", "to": {"type": "binData", "subtype": 42}}, 4341107),
        ({"input": "aGVsbG8", "to": "binData", "format": "base64"}, 241),
    ]:
        with pytest.raises(OperationFailure) as info:
            project({"$convert": options})
        assert info.value.code == code, options


def test_group_memory_limit_spill(db):
    """$group holds 100 MB of groups: beyond it, it fails with 292 when disk use is
    refused, and otherwise spills and still gives every group whole."""
    big = "x" * (1024 * 1024)
    for start in range(0, 110, 10):
        db.c.insert_many([{"_id": i, "k": i % 55, "big": big} for i in range(start, start + 10)])
    pipeline = [
        {"$group": {"_id": "$k", "bigs": {"$push": "$big"}, "ids": {"$push": "$_id"}}},
        {"$project": {"n": {"$size": "$bigs"}, "ids": 1}},
        {"$sort": {"_id": 1}},
    ]
    with raises_code("QueryExceededMemoryLimitNoDiskUseAllowed"):
        list(db.c.aggregate(pipeline, allowDiskUse=False))
    out = list(db.c.aggregate(pipeline))
    assert out == [{"_id": k, "ids": [k, k + 55], "n": 2} for k in range(55)]


def test_set_window_fields_spills_past_the_memory_limit(db):
    """$setWindowFields sorts its input by partition through a sort that holds 100 MB:
    beyond it, 292 without disk use, otherwise one partition at a time in memory."""
    big = "x" * (1024 * 1024)
    for start in range(0, 110, 10):
        db.c.insert_many([{"_id": i, "p": i % 5, "big": big} for i in range(start, start + 10)])
    pipeline = [
        {
            "$setWindowFields": {
                "partitionBy": "$p",
                "sortBy": {"_id": 1},
                "output": {"rank": {"$documentNumber": {}}},
            }
        },
        {"$project": {"big": 0}},
    ]
    with raises_code("QueryExceededMemoryLimitNoDiskUseAllowed"):
        list(db.c.aggregate(pipeline, allowDiskUse=False))
    out = list(db.c.aggregate(pipeline))
    assert out == [
        {"_id": i, "p": p, "rank": i // 5 + 1} for p in range(5) for i in range(p, 110, 5)
    ]


def test_bucket_auto_and_densify_spill_past_the_memory_limit(db):
    """$bucketAuto and $densify sort their input through a sort that holds 100 MB:
    beyond it, 292 without disk use, otherwise the same answers from spilled runs. (The
    bucket output reads `big`, or the scan would not even decode it.)"""
    big = "x" * (1024 * 1024)
    for start in range(0, 110, 10):
        db.c.insert_many(
            [{"_id": i, "v": (i * 7) % 110, "big": big} for i in range(start, start + 10)]
        )
    buckets = [
        {
            "$bucketAuto": {
                "groupBy": "$v",
                "buckets": 2,
                "output": {
                    "n": {"$sum": 1},
                    "ids": {"$push": "$_id"},
                    "len": {"$max": {"$strLenCP": "$big"}},
                },
            }
        }
    ]
    densify = [
        {"$densify": {"field": "v", "range": {"step": 1, "bounds": "full"}}},
        {"$project": {"v": 1}},
    ]
    for pipeline in (buckets, densify):
        with raises_code("QueryExceededMemoryLimitNoDiskUseAllowed"):
            list(db.c.aggregate(pipeline, allowDiskUse=False))
    out = list(db.c.aggregate(buckets))
    low = sorted(i for i in range(110) if (i * 7) % 110 < 55)
    high = sorted(set(range(110)) - set(low))
    assert out == [
        {"_id": {"min": 0, "max": 55}, "n": 55, "ids": low, "len": len(big)},
        {"_id": {"min": 55, "max": 109}, "n": 55, "ids": high, "len": len(big)},
    ]
    values = [d["v"] for d in db.c.aggregate(densify)]
    assert values == list(range(110))


def test_allow_disk_use_must_be_a_boolean(db):
    db.c.insert_one({"a": 1})
    with raises_code("TypeMismatch"):
        db.command("aggregate", "c", pipeline=[{"$sort": {"a": 1}}], cursor={}, allowDiskUse="yes")
    # MongoDB 8.0: not even a number or null.
    for value in (1, None):
        with raises_code("TypeMismatch"):
            db.command("aggregate", "c", pipeline=[], cursor={}, allowDiskUse=value)


def test_cursor_batch_size_takes_any_number(db):
    """cursor.batchSize is read as mongod 8.0's safe int64: fractions truncate; what is
    negative after that is refused."""
    db.c.insert_many([{"_id": i} for i in range(5)])
    reply = db.command("aggregate", "c", pipeline=[], cursor={"batchSize": 2.5})
    assert len(reply["cursor"]["firstBatch"]) == 2
    reply = db.command("aggregate", "c", pipeline=[], cursor={"batchSize": -0.5})
    assert reply["cursor"]["firstBatch"] == []
    with raises_code("BadValue"):
        db.command("aggregate", "c", pipeline=[], cursor={"batchSize": -1})


def test_aggregate_with_explain_true_returns_the_plan(db, coll):
    coll.insert_many([{"_id": i, "a": i % 3} for i in range(10)])
    coll.create_index("a")
    reply = db.command("aggregate", "c", pipeline=[{"$match": {"a": 1}}], explain=True)
    assert "cursor" not in reply
    assert reply["queryPlanner"]["winningPlan"]["inputStage"]["stage"] == "IXSCAN"
    assert "executionStats" not in reply
    grouped = [{"$match": {"a": 1}}, {"$group": {"_id": None, "n": {"$sum": 1}}}]
    reply = db.command("aggregate", "c", pipeline=grouped, explain=True)
    assert reply["stages"][0]["$cursor"]["queryPlanner"]["winningPlan"]["stage"] == "IXSCAN"
    assert next(coll.aggregate(grouped))["n"] == 3


def test_database_aggregate_with_explain_true_shows_its_stages(client, db):
    stages = [{"$documents": [{"x": 1}]}, {"$match": {"x": 1}}]
    reply = db.command("aggregate", 1, pipeline=stages, explain=True)
    assert reply["stages"] == stages
    assert "cursor" not in reply


def test_aggregate_with_explain_true_refuses_a_bad_pipeline(db, coll):
    coll.insert_one({"a": 1})
    with pytest.raises(OperationFailure) as info:
        db.command("aggregate", "c", pipeline=[{"$bogus": {}}], explain=True)
    assert info.value.code == 40324
    assert coll.count_documents({}) == 1


def test_operators_added_up_to_mongodb_8(db):
    """Trigonometry, bitwise, data size and timestamp operators, computed here in Python
    from the same values."""
    import math

    from bson import Int64, Timestamp

    db.c.insert_one({"_id": 1, "x": 0.5, "a": 12, "b": Int64(10), "ts": Timestamp(1700000000, 7)})
    [doc] = db.c.aggregate(
        [
            {
                "$project": {
                    "_id": 0,
                    "sin": {"$sin": "$x"},
                    "acos": {"$acos": "$x"},
                    "atan2": {"$atan2": ["$x", 1]},
                    "deg": {"$radiansToDegrees": "$x"},
                    "and": {"$bitAnd": ["$a", "$b"]},
                    "or": {"$bitOr": ["$a", 3]},
                    "xor": {"$bitXor": ["$a", "$b"]},
                    "not": {"$bitNot": "$a"},
                    "size": {"$bsonSize": "$$ROOT"},
                    "bytes": {"$binarySize": "héllo"},
                    "seconds": {"$tsSecond": "$ts"},
                    "increment": {"$tsIncrement": "$ts"},
                    "hashed": {"$toHashedIndexKey": "$a"},
                }
            }
        ]
    )
    assert doc["sin"] == math.sin(0.5) and doc["acos"] == math.acos(0.5)
    assert doc["atan2"] == math.atan2(0.5, 1) and doc["deg"] == math.degrees(0.5)
    assert (doc["and"], doc["or"], doc["xor"], doc["not"]) == (12 & 10, 12 | 3, 12 ^ 10, ~12)
    assert isinstance(doc["and"], int) and doc["size"] == len(bson.encode(db.c.find_one({})))
    assert (doc["bytes"], doc["seconds"], doc["increment"]) == (6, 1700000000, 7)
    assert isinstance(doc["hashed"], int)
    with raises_code("Location50989"):
        list(db.c.aggregate([{"$project": {"v": {"$acos": 2}}}]))
    with raises_code("TypeMismatch"):
        list(db.c.aggregate([{"$project": {"v": {"$bitAnd": ["$x", 1]}}}]))


def test_decimal_functions_are_computed_at_34_digits(db):
    """$sqrt, $exp, $ln, $log10, $log, $pow, $mod and $sigmoid of decimals are decimal128
    arithmetic (34 digits), not a double's 15 digits written as a decimal."""
    db.c.insert_one({"_id": 1})
    d = bson.Decimal128
    cases = {
        "sqrt": ({"$sqrt": d("2")}, "1.414213562373095048801688724209698"),
        "exp": ({"$exp": d("1")}, "2.718281828459045235360287471352662"),
        "ln": ({"$ln": d("10")}, "2.302585092994045684017991454684364"),
        "log10": ({"$log10": d("2")}, "0.3010299956639811952137388947244930"),
        "log": ({"$log": [d("100"), d("10")]}, "2"),
        "pow": ({"$pow": [2, d("0.5")]}, "1.414213562373095048801688724209698"),
        "exact pow": ({"$pow": [d("2"), 10]}, "1024"),
        "mod": ({"$mod": [d("10.5"), 3]}, "1.5"),
        "sigmoid": ({"$sigmoid": d("0")}, "0.5"),
    }
    project = {name: expression for name, (expression, _) in cases.items()}
    [result] = db.c.aggregate([{"$project": {"_id": 0, **project}}])
    assert {name: str(value) for name, value in result.items()} == {
        name: expected for name, (_, expected) in cases.items()
    }
