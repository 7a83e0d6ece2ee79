"""Aggregation stages that read or write other collections ($lookup, $graphLookup,
$unionWith, $facet, $out, $merge) and database-level aggregation ($documents,
$listLocalSessions, $currentOp), with the errors MongoDB gives for their misuse.
"""

from __future__ import annotations

import pytest
from bson import ObjectId
from pymongo.errors import OperationFailure

ORDERS = [
    {"_id": 1, "item": "apple", "qty": 2},
    {"_id": 2, "item": ["pear", "plum"], "qty": 1},
    {"_id": 3, "qty": 5},
    {"_id": 4, "item": "kiwi", "qty": 3},
]
STOCK = [
    {"_id": 10, "sku": "apple", "instock": 120},
    {"_id": 11, "sku": "pear", "instock": 80},
    {"_id": 12, "sku": "plum", "instock": 0},
    {"_id": 13, "instock": 7},
    {"_id": 14, "sku": ["apple", "fig"], "instock": 1},
]


def error_of(run) -> OperationFailure:
    with pytest.raises(OperationFailure) as info:
        run()
    return info.value


@pytest.fixture
def shop(db):
    db.orders.insert_many(ORDERS)
    db.stock.insert_many(STOCK)
    return db


def joined_ids(doc: dict, field: str) -> list:
    return [d["_id"] for d in doc[field]]


# --- $lookup -----------------------------------------------------------------------


def test_lookup_equality_matches_arrays_and_missing(shop):
    out = list(
        shop.orders.aggregate(
            [
                {
                    "$lookup": {
                        "from": "stock",
                        "localField": "item",
                        "foreignField": "sku",
                        "as": "s",
                    }
                },
                {"$sort": {"_id": 1}},
            ]
        )
    )
    assert [joined_ids(d, "s") for d in out] == [[10, 14], [11, 12], [13], []]
    assert out[0]["item"] == "apple" and out[0]["qty"] == 2


def test_lookup_pipeline_with_let(shop):
    out = list(
        shop.orders.aggregate(
            [
                {"$match": {"_id": {"$in": [1, 2]}}},
                {
                    "$lookup": {
                        "from": "stock",
                        "let": {"want": "$qty"},
                        "pipeline": [
                            {
                                "$match": {
                                    "$expr": {"$gte": ["$instock", {"$multiply": ["$$want", 50]}]}
                                }
                            },
                            {"$project": {"_id": 1}},
                        ],
                        "as": "enough",
                    }
                },
                {"$sort": {"_id": 1}},
            ]
        )
    )
    assert [d["enough"] for d in out] == [[{"_id": 10}], [{"_id": 10}, {"_id": 11}]]


def test_lookup_combined_form_and_uncorrelated_pipeline(shop):
    out = list(
        shop.orders.aggregate(
            [
                {"$match": {"_id": 1}},
                {
                    "$lookup": {
                        "from": "stock",
                        "localField": "item",
                        "foreignField": "sku",
                        "pipeline": [{"$match": {"instock": {"$gt": 10}}}],
                        "as": "big",
                    }
                },
                {"$lookup": {"from": "stock", "pipeline": [{"$count": "n"}], "as": "total"}},
            ]
        )
    )
    assert joined_ids(out[0], "big") == [10]
    assert out[0]["total"] == [{"n": 5}]


def test_lookup_from_missing_collection_gives_empty_arrays(shop):
    out = list(
        shop.orders.aggregate(
            [
                {
                    "$lookup": {
                        "from": "nothing",
                        "localField": "item",
                        "foreignField": "sku",
                        "as": "s",
                    }
                },
            ]
        )
    )
    assert all(d["s"] == [] for d in out) and len(out) == 4


@pytest.mark.parametrize(
    "spec,code",
    [
        ({"from": "stock", "localField": "item", "as": "s"}, 9),
        ({"from": "stock", "localField": "a", "foreignField": "b"}, 9),
        ({"from": "stock", "localField": "a", "foreignField": "b", "as": "s", "let": {"x": 1}}, 9),
        ({"from": "stock", "pipeline": {"$match": {}}, "as": "s"}, 14),
        ({"pipeline": [{"$match": {}}], "as": "s"}, 9),
        ({"from": "stock", "pipeline": [{"$out": "x"}], "as": "s"}, 51047),
        ({"from": "stock", "pipeline": [], "as": "s", "bogus": "x"}, 9),
        ({"from": "stock", "pipeline": [], "as": 1}, 14),
    ],
)
def test_lookup_errors(shop, spec, code):
    assert error_of(lambda: list(shop.orders.aggregate([{"$lookup": spec}]))).code == code


# --- $graphLookup ------------------------------------------------------------------


def test_graph_lookup_follows_the_chain(db):
    db.people.insert_many(
        [
            {"_id": 1, "name": "Dev"},
            {"_id": 2, "name": "Eliot", "boss": "Dev"},
            {"_id": 3, "name": "Ron", "boss": "Eliot"},
            {"_id": 4, "name": "Asya", "boss": "Ron"},
        ]
    )
    spec = {
        "from": "people",
        "startWith": "$boss",
        "connectFromField": "boss",
        "connectToField": "name",
        "as": "chain",
        "depthField": "depth",
    }
    [asya] = db.people.aggregate([{"$match": {"name": "Asya"}}, {"$graphLookup": spec}])
    assert sorted((p["name"], p["depth"]) for p in asya["chain"]) == [
        ("Dev", 2),
        ("Eliot", 1),
        ("Ron", 0),
    ]
    [asya] = db.people.aggregate(
        [
            {"$match": {"name": "Asya"}},
            {"$graphLookup": {**spec, "maxDepth": 0}},
        ]
    )
    assert [p["name"] for p in asya["chain"]] == ["Ron"]
    err = error_of(lambda: list(db.people.aggregate([{"$graphLookup": {**spec, "maxDepth": -1}}])))
    assert err.code == 40101


# --- $unionWith and $facet ---------------------------------------------------------


def test_union_with(shop):
    out = list(
        shop.orders.aggregate(
            [
                {"$project": {"_id": 1}},
                {
                    "$unionWith": {
                        "coll": "stock",
                        "pipeline": [
                            {"$match": {"instock": {"$lt": 10}}},
                            {"$project": {"_id": 1}},
                        ],
                    }
                },
            ]
        )
    )
    assert [d["_id"] for d in out] == [1, 2, 3, 4, 12, 13, 14]
    out = list(shop.orders.aggregate([{"$unionWith": "stock"}, {"$count": "n"}]))
    assert out == [{"n": 9}]
    out = list(
        shop.orders.aggregate(
            [
                {"$limit": 1},
                {"$project": {"_id": 1}},
                {"$unionWith": {"pipeline": [{"$documents": [{"_id": "extra"}]}]}},
            ]
        )
    )
    assert out == [{"_id": 1}, {"_id": "extra"}]


def test_facet(shop):
    [out] = shop.stock.aggregate(
        [
            {
                "$facet": {
                    "empty": [{"$match": {"instock": 0}}, {"$project": {"_id": 1}}],
                    "count": [{"$count": "n"}],
                }
            },
        ]
    )
    assert out == {"empty": [{"_id": 12}], "count": [{"n": 5}]}
    err = error_of(lambda: list(shop.stock.aggregate([{"$facet": {"a": [{"$out": "x"}]}}])))
    assert err.code == 40600


# --- $out --------------------------------------------------------------------------


def test_out_replaces_the_target_and_replies_with_an_empty_batch(shop):
    shop.target.insert_one({"_id": "old"})
    reply = shop.command(
        "aggregate",
        "stock",
        pipeline=[{"$match": {"instock": {"$gt": 50}}}, {"$out": "target"}],
        cursor={"batchSize": 0},
    )
    assert reply["cursor"]["firstBatch"] == [] and reply["cursor"]["id"] == 0
    assert sorted(d["_id"] for d in shop.target.find()) == [10, 11]
    assert not [n for n in shop.list_collection_names() if n.startswith("tmp.agg_out")]


def test_out_to_another_database(shop, client):
    other = client[shop.name + "_out"]
    try:
        list(
            shop.orders.aggregate(
                [{"$match": {"_id": 1}}, {"$out": {"db": other.name, "coll": "copy"}}]
            )
        )
        assert list(other.copy.find()) == [ORDERS[0]]
    finally:
        client.drop_database(other.name)


def test_out_keeps_the_targets_indexes_and_fails_cleanly(shop):
    shop.target.insert_one({"_id": "old", "k": 1})
    shop.target.create_index("k", unique=True)
    list(shop.stock.aggregate([{"$project": {"k": "$_id"}}, {"$out": "target"}]))
    assert "k_1" in shop.target.index_information()
    assert shop.target.count_documents({}) == 5
    # Duplicate values for the unique index: the $out fails, the target is unchanged.
    err = error_of(
        lambda: list(shop.stock.aggregate([{"$project": {"k": "x"}}, {"$out": "target"}]))
    )
    assert err.code == 11000
    assert sorted(d["k"] for d in shop.target.find()) == [10, 11, 12, 13, 14]
    assert not [n for n in shop.list_collection_names() if n.startswith("tmp.agg_out")]


@pytest.mark.parametrize(
    "pipeline,code",
    [
        ([{"$out": "a"}, {"$match": {}}], 40601),
        ([{"$out": ""}], 73),
        ([{"$out": "bad$name"}], 20),
        ([{"$out": "system.views"}], 17385),
        ([{"$out": {"db": "admin", "coll": "x"}}], 31321),
        ([{"$out": 5}], 16990),
        ([{"$out": {"coll": "x"}}], 40414),
    ],
)
def test_out_errors(shop, pipeline, code):
    assert error_of(lambda: list(shop.orders.aggregate(pipeline))).code == code


# --- $merge ------------------------------------------------------------------------


def test_merge_default_merges_and_inserts(shop):
    shop.target.insert_many([{"_id": 10, "note": "kept"}, {"_id": 99}])
    reply = shop.command("aggregate", "stock", pipeline=[{"$merge": "target"}], cursor={})
    assert reply["cursor"]["firstBatch"] == [] and reply["cursor"]["id"] == 0
    assert shop.target.find_one({"_id": 10}) == {
        "_id": 10,
        "note": "kept",
        "sku": "apple",
        "instock": 120,
    }
    assert shop.target.count_documents({}) == 6


@pytest.mark.parametrize(
    "when_matched,when_not_matched,expected",
    [
        ("replace", "insert", [{"_id": 1, "v": "new"}, {"_id": 2, "v": "new"}]),
        ("keepExisting", "insert", [{"_id": 1, "v": "old", "o": 1}, {"_id": 2, "v": "new"}]),
        ("merge", "discard", [{"_id": 1, "v": "new", "o": 1}]),
        (
            [{"$set": {"v": {"$concat": ["$v", "+", "$$new.v"]}}}],
            "insert",
            [{"_id": 1, "v": "old+new", "o": 1}, {"_id": 2, "v": "new"}],
        ),
    ],
)
def test_merge_modes(db, when_matched, when_not_matched, expected):
    db.target.insert_one({"_id": 1, "v": "old", "o": 1})
    db.source.insert_many([{"_id": 1, "v": "new"}, {"_id": 2, "v": "new"}])
    list(
        db.source.aggregate(
            [
                {
                    "$merge": {
                        "into": "target",
                        "whenMatched": when_matched,
                        "whenNotMatched": when_not_matched,
                    }
                },
            ]
        )
    )
    assert list(db.target.find().sort("_id", 1)) == expected


def test_merge_pipeline_with_let(db):
    db.target.insert_one({"_id": 1, "total": 10})
    db.source.insert_one({"_id": 1, "add": 5})
    list(
        db.source.aggregate(
            [
                {
                    "$merge": {
                        "into": "target",
                        "let": {"inc": "$add"},
                        "whenMatched": [{"$set": {"total": {"$add": ["$total", "$$inc"]}}}],
                    }
                },
            ]
        )
    )
    assert db.target.find_one() == {"_id": 1, "total": 15}


def test_merge_fail_modes(db):
    db.target.insert_one({"_id": 1})
    db.source.insert_many([{"_id": 1, "x": 1}, {"_id": 2, "x": 2}])
    err = error_of(
        lambda: list(db.source.aggregate([{"$merge": {"into": "target", "whenMatched": "fail"}}]))
    )
    assert err.code == 11000
    assert err.details["keyPattern"] == {"_id": 1} and err.details["keyValue"] == {"_id": 1}
    err = error_of(
        lambda: list(
            db.source.aggregate(
                [
                    {"$match": {"_id": 2}},
                    {"$merge": {"into": "target", "whenNotMatched": "fail"}},
                ]
            )
        )
    )
    assert err.code == 13113


def test_merge_on_other_fields_needs_a_unique_index(db):
    db.target.insert_one({"_id": 1, "sku": "a", "n": 1})
    db.source.insert_many([{"sku": "a", "n": 2}, {"sku": "b", "n": 3}])
    spec = {"into": "target", "on": "sku", "whenMatched": "replace"}
    err = error_of(lambda: list(db.source.aggregate([{"$project": {"_id": 0}}, {"$merge": spec}])))
    assert err.code == 51183
    db.target.create_index("sku", unique=True)
    list(db.source.aggregate([{"$project": {"_id": 0}}, {"$merge": spec}]))
    docs = list(db.target.find().sort("sku", 1))
    assert docs[0] == {"_id": 1, "sku": "a", "n": 2}
    assert docs[1]["sku"] == "b" and isinstance(docs[1]["_id"], ObjectId)
    err = error_of(
        lambda: list(
            db.source.aggregate(
                [{"$project": {"sku": 1}}, {"$set": {"sku": [1]}}, {"$merge": spec}]
            )
        )
    )
    assert err.code == 51185


def test_merge_into_another_database(db, client):
    other = client[db.name + "_merge"]
    try:
        db.source.insert_one({"_id": 1})
        list(db.source.aggregate([{"$merge": {"into": {"db": other.name, "coll": "t"}}}]))
        assert list(other.t.find()) == [{"_id": 1}]
    finally:
        client.drop_database(other.name)


@pytest.mark.parametrize(
    "spec,code",
    [
        ({"into": "t", "whenMatched": "keepExisting", "whenNotMatched": "fail"}, 51181),
        ({"into": "t", "let": {"a": 1}}, 51199),
        ({"into": "t", "on": ["a", "a"]}, 31465),
        ({"into": "t", "whenMatched": [{"$match": {}}]}, 72),
        ({"into": "system.x"}, 31319),
        ({"into": {"db": "local", "coll": "x"}}, 31320),
        ({"into": "t", "whenMatched": "sometimes"}, 2),
        ({"whenMatched": "replace"}, 40414),
    ],
)
def test_merge_errors(db, spec, code):
    db.source.insert_one({"_id": 1})
    assert error_of(lambda: list(db.source.aggregate([{"$merge": spec}]))).code == code


def test_merge_must_be_last(db):
    err = error_of(lambda: list(db.source.aggregate([{"$merge": "t"}, {"$limit": 1}])))
    assert err.code == 40601
    assert "$merge can only be the final stage in the pipeline" in str(err)


# --- database-level aggregation ----------------------------------------------------


def test_documents_then_a_pipeline(db):
    out = list(
        db.aggregate(
            [
                {"$documents": [{"x": 1}, {"x": 2}, {"x": 3}]},
                {"$match": {"x": {"$gte": 2}}},
                {"$group": {"_id": None, "sum": {"$sum": "$x"}}},
            ]
        )
    )
    assert out == [{"_id": None, "sum": 5}]


def test_documents_merge_duplicate_key_is_reported(db):
    db.test.insert_many([{"_id": 1, "x": 1}, {"_id": 2, "x": 1}])
    err = error_of(
        lambda: list(
            db.aggregate(
                [
                    {"$documents": [{"_id": 2, "x": 1}]},
                    {"$merge": {"into": "test", "whenMatched": "fail"}},
                ]
            )
        )
    )
    assert err.code == 11000
    assert err.details["keyPattern"] == {"_id": 1} and err.details["keyValue"] == {"_id": 2}


def test_documents_out(db):
    list(db.aggregate([{"$documents": [{"_id": 1}, {"_id": 2}]}, {"$out": "made"}]))
    assert list(db.made.find()) == [{"_id": 1}, {"_id": 2}]


def test_list_local_sessions_and_current_op(client):
    admin = client.admin
    out = list(
        admin.aggregate(
            [{"$listLocalSessions": {}}, {"$limit": 1}, {"$project": {"_id": 0, "d": "x"}}]
        )
    )
    assert out == [{"d": "x"}]
    ops = list(admin.aggregate([{"$currentOp": {}}]))
    assert ops and all(op["active"] for op in ops)


def test_current_op_needs_admin(db):
    assert error_of(lambda: list(db.aggregate([{"$currentOp": {}}]))).code == 73


@pytest.mark.parametrize(
    "pipeline,collectionless,code",
    [
        ([{"$match": {}}], True, 73),
        ([], True, 73),
        ([{"$documents": []}], False, 73),
        ([{"$match": {}}, {"$documents": []}], True, 73),
        ([{"$documents": 1}], True, 5858203),
    ],
)
def test_namespace_errors(db, pipeline, collectionless, code):
    target = 1 if collectionless else "c"
    err = error_of(lambda: db.command("aggregate", target, pipeline=pipeline, cursor={}))
    assert err.code == code


def test_documents_must_be_first(db):
    err = error_of(
        lambda: db.command(
            "aggregate",
            1,
            pipeline=[{"$documents": []}, {"$documents": []}],
            cursor={},
        )
    )
    assert err.code == 40602
