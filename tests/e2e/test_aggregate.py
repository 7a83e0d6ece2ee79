"""Aggregation pipelines with the common stages, and the errors for bad pipelines.

Expected results are computed here in plain Python from the same data, so each case
states what the pipeline means rather than a pasted server answer.
"""

from __future__ import annotations

from collections import defaultdict

import pytest

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
