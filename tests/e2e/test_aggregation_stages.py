"""The rest of the aggregation language over the wire: the selecting and percentile
accumulators ($top ... $minN, $median, $percentile) in $group and as expressions, and
the stages $bucket, $bucketAuto, $sample, $redact, $setWindowFields, $densify, $fill,
$collStats and $indexStats, with MongoDB 7.0's answers and error codes.
"""

from __future__ import annotations

import datetime
import math
import statistics

import pytest
from pymongo.errors import OperationFailure

from helpers import raises_code

SCORES = [
    {"_id": 1, "game": "g1", "player": "ann", "score": 31},
    {"_id": 2, "game": "g1", "player": "bob", "score": 12},
    {"_id": 3, "game": "g1", "player": "cy", "score": 57},
    {"_id": 4, "game": "g1", "player": "dee", "score": None},
    {"_id": 5, "game": "g2", "player": "ann", "score": 8},
    {"_id": 6, "game": "g2", "player": "bob", "score": 93},
    {"_id": 7, "game": "g2", "player": "cy", "score": 57},
]


def fails(collection, pipeline, code: int) -> OperationFailure:
    """Runs `pipeline`, expecting MongoDB's error `code`."""
    with pytest.raises(OperationFailure) as info:
        list(collection.aggregate(pipeline))
    assert info.value.code == code, info.value.details
    return info.value


@pytest.fixture
def scores(coll):
    coll.insert_many(SCORES)
    return coll


def by_game(collection, accumulators: dict) -> dict:
    """The `$group`-by-game results, keyed by game, without `_id`."""
    out = collection.aggregate([{"$group": {"_id": "$game", **accumulators}}])
    return {d.pop("_id"): d for d in out}


# --- accumulators ------------------------------------------------------------------


def test_top_and_bottom(scores):
    out = by_game(
        scores,
        {
            "best": {"$top": {"sortBy": {"score": -1}, "output": "$player"}},
            "worst": {"$bottom": {"sortBy": {"score": -1}, "output": ["$player", "$score"]}},
            "top2": {"$topN": {"n": 2, "sortBy": {"score": -1, "player": 1}, "output": "$player"}},
            "bottom2": {"$bottomN": {"n": 2, "sortBy": {"score": -1}, "output": "$score"}},
        },
    )
    assert out["g1"] == {
        "best": "cy",
        "worst": ["dee", None],
        "top2": ["cy", "ann"],
        "bottom2": [12, None],
    }
    assert out["g2"] == {
        "best": "bob",
        "worst": ["ann", 8],
        "top2": ["bob", "cy"],
        "bottom2": [57, 8],
    }


def test_first_last_max_min_n(scores):
    out = by_game(
        scores,
        {
            "first": {"$firstN": {"n": 2, "input": "$score"}},
            "last": {"$lastN": {"n": 2, "input": "$score"}},
            "max": {"$maxN": {"n": 2, "input": "$score"}},
            "min": {"$minN": {"n": 5, "input": "$score"}},
        },
    )
    # $firstN/$lastN keep nulls; $maxN/$minN ignore them.
    assert out["g1"] == {
        "first": [31, 12],
        "last": [57, None],
        "max": [57, 31],
        "min": [12, 31, 57],
    }
    assert out["g2"] == {"first": [8, 93], "last": [93, 57], "max": [93, 57], "min": [8, 57, 93]}


def test_n_may_depend_on_the_group_key(scores):
    out = by_game(
        scores,
        {
            "first": {
                "$firstN": {
                    "input": "$player",
                    "n": {"$cond": {"if": {"$eq": ["$game", "g2"]}, "then": 1, "else": 3}},
                }
            }
        },
    )
    assert out == {"g1": {"first": ["ann", "bob", "cy"]}, "g2": {"first": ["ann"]}}


def test_median_and_percentile(scores):
    out = by_game(
        scores,
        {
            "median": {"$median": {"input": "$score", "method": "approximate"}},
            "p": {"$percentile": {"input": "$score", "p": [0.1, 0.9], "method": "approximate"}},
        },
    )
    assert out["g1"] == {"median": 31.0, "p": [12.0, 57.0]}
    assert out["g2"] == {"median": 57.0, "p": [8.0, 93.0]}


def test_classic_accumulators_over_the_wire(scores):
    out = by_game(
        scores,
        {
            "n": {"$count": {}},
            "sum": {"$sum": "$score"},
            "avg": {"$avg": "$score"},
            "players": {"$addToSet": "$player"},
            "sd": {"$stdDevPop": "$score"},
            "merged": {"$mergeObjects": {"last": "$player"}},
        },
    )
    assert out["g2"]["n"] == 3 and out["g2"]["sum"] == 158
    assert out["g1"]["avg"] == 100 / 3
    assert sorted(out["g1"]["players"]) == ["ann", "bob", "cy", "dee"]
    assert out["g2"]["merged"] == {"last": "cy"}
    assert out["g2"]["sd"] == pytest.approx(statistics.pstdev([8, 93, 57]))


def test_accumulators_merge_across_scan_ranges(coll):
    """Enough records for the server to group several ranges in parallel and merge the
    partial states: order-sensitive selections must still follow natural order."""
    n = 40_000
    values = [(i * 7919) % 1000 for i in range(n)]
    coll.insert_many([{"_id": i, "k": i % 3, "v": v} for i, v in enumerate(values)])
    out = {
        d.pop("_id"): d
        for d in coll.aggregate(
            [
                {
                    "$group": {
                        "_id": "$k",
                        "first": {"$firstN": {"n": 3, "input": "$_id"}},
                        "last": {"$lastN": {"n": 3, "input": "$_id"}},
                        "top": {"$topN": {"n": 3, "sortBy": {"v": -1}, "output": "$_id"}},
                        "bottom": {"$bottom": {"sortBy": {"v": -1}, "output": "$_id"}},
                        "min": {"$minN": {"n": 2, "input": "$v"}},
                        "median": {"$median": {"input": "$v", "method": "approximate"}},
                    }
                }
            ]
        )
    }
    for k in range(3):
        ids = [i for i in range(n) if i % 3 == k]
        vs = sorted(values[i] for i in ids)
        # Ties keep the first document seen: sort by value, then by natural order.
        by_value = sorted(ids, key=lambda i: (-values[i], i))
        first_of_lowest = [i for i in ids if values[i] == vs[0]][0]
        assert out[k]["first"] == ids[:3]
        assert out[k]["last"] == ids[-3:]
        assert out[k]["top"] == by_value[:3]
        assert out[k]["bottom"] == first_of_lowest
        assert out[k]["min"] == vs[:2]
        assert out[k]["median"] == float(vs[math.ceil(0.5 * len(vs)) - 1])


def test_selection_and_quantile_expressions(coll):
    coll.insert_one({"_id": 1, "a": [4, None, 1, 9, 3]})
    out = coll.aggregate(
        [
            {
                "$project": {
                    "_id": 0,
                    "first": {"$firstN": {"n": 2, "input": "$a"}},
                    "last": {"$lastN": {"n": 2, "input": "$a"}},
                    "max": {"$maxN": {"n": 2, "input": "$a"}},
                    "min": {"$minN": {"n": 2, "input": "$a"}},
                    "median": {"$median": {"input": "$a", "method": "approximate"}},
                    "p": {"$percentile": {"input": "$a", "p": [0.5, 1], "method": "approximate"}},
                }
            }
        ]
    )
    assert list(out) == [
        {
            "first": [4, None],
            "last": [9, 3],
            "max": [9, 4],
            "min": [1, 3],
            "median": 3.0,
            "p": [3.0, 9.0],
        }
    ]


@pytest.mark.parametrize(
    "accumulator, code",
    [
        ({"$topN": {"sortBy": {"a": 1}, "output": "$a"}}, 5788003),
        ({"$top": {"output": "$a"}}, 5788005),
        ({"$top": {"n": 1, "sortBy": {"a": 1}, "output": "$a"}}, 5788002),
        ({"$topN": 1}, 5788001),
        ({"$top": {"sortBy": {"a": 2}, "output": "$a"}}, 15975),
        # MongoDB 8.0's accumulators: one code for every invalid n.
        ({"$firstN": {"n": 0, "input": "$a"}}, 7548606),
        ({"$lastN": {"n": 1.5, "input": "$a"}}, 7548606),
        ({"$maxN": {"n": "two", "input": "$a"}}, 7548606),
        ({"$minN": {"n": 1}}, 5787907),
        ({"$firstN": {"input": "$a"}}, 5787906),
        ({"$median": {"input": "$a"}}, 40414),
        ({"$median": {"input": "$a", "method": "exact"}}, 2),
        ({"$percentile": {"input": "$a", "p": [2], "method": "approximate"}}, 7750303),
        ({"$percentile": {"input": "$a", "p": [], "method": "approximate"}}, 7750301),
        ({"$percentile": {"input": "$a", "p": "$a", "method": "approximate"}}, 7750300),
        ({"$percentile": 1}, 7429703),
    ],
)
def test_accumulator_errors(scores, accumulator, code):
    fails(scores, [{"$group": {"_id": None, "f": accumulator}}], code)


def test_expression_form_errors(scores):
    fails(scores, [{"$project": {"f": {"$firstN": {"n": 1, "input": "$score"}}}}], 5788200)
    fails(scores, [{"$project": {"f": {"$median": 1}}}], 7436201)


# --- $bucket, $bucketAuto, $sample, $redact ----------------------------------------


def test_bucket(scores):
    out = list(
        scores.aggregate(
            [
                {
                    "$bucket": {
                        "groupBy": "$score",
                        "boundaries": [0, 20, 60],
                        "default": "other",
                        "output": {"n": {"$sum": 1}, "who": {"$push": "$player"}},
                    }
                }
            ]
        )
    )
    assert out == [
        {"_id": 0, "n": 2, "who": ["bob", "ann"]},
        {"_id": 20, "n": 3, "who": ["ann", "cy", "cy"]},
        {"_id": "other", "n": 2, "who": ["dee", "bob"]},
    ]
    counts = list(scores.aggregate([{"$bucket": {"groupBy": "$_id", "boundaries": [1, 4, 8]}}]))
    assert counts == [{"_id": 1, "count": 3}, {"_id": 4, "count": 4}]


@pytest.mark.parametrize(
    "spec, code",
    [
        ({"groupBy": "$score", "boundaries": [0, 20]}, 40066),
        ({"groupBy": "score", "boundaries": [0, 20]}, 40202),
        ({"groupBy": "$score", "boundaries": [0]}, 40192),
        ({"groupBy": "$score", "boundaries": [20, 0]}, 40194),
        ({"groupBy": "$score", "boundaries": [0, "a"]}, 40193),
        ({"groupBy": "$score", "boundaries": [0, 100], "default": 50}, 40199),
        ({"groupBy": "$score", "boundaries": [0, 100], "bogus": 1}, 40197),
        ({"groupBy": "$score"}, 40198),
    ],
)
def test_bucket_errors(scores, spec, code):
    fails(scores, [{"$bucket": spec}], code)


def test_bucket_auto(coll):
    coll.insert_many([{"v": v} for v in [9, 1, 2, 2, 2, 3, 4, 8, 5]])
    out = list(coll.aggregate([{"$bucketAuto": {"groupBy": "$v", "buckets": 3}}]))
    assert out == [
        {"_id": {"min": 1, "max": 3}, "count": 4},
        {"_id": {"min": 3, "max": 8}, "count": 3},
        {"_id": {"min": 8, "max": 9}, "count": 2},
    ]
    out = list(
        coll.aggregate(
            [
                {
                    "$bucketAuto": {
                        "groupBy": "$v",
                        "buckets": 2,
                        "granularity": "POWERSOF2",
                        "output": {"total": {"$sum": "$v"}},
                    }
                }
            ]
        )
    )
    assert out == [
        {"_id": {"min": 0.5, "max": 4}, "total": 10},
        {"_id": {"min": 4, "max": 16}, "total": 26},
    ]


@pytest.mark.parametrize(
    "spec, code",
    [
        ({"groupBy": "$v", "buckets": 0}, 40243),
        ({"groupBy": "$v", "buckets": "3"}, 40241),
        ({"groupBy": "$v", "buckets": 2, "granularity": "R7"}, 40257),
        ({"groupBy": "$v"}, 40246),
        ({"groupBy": "$v", "buckets": 2, "nope": 1}, 40245),
    ],
)
def test_bucket_auto_errors(coll, spec, code):
    coll.insert_one({"v": 1})
    fails(coll, [{"$bucketAuto": spec}], code)


def test_bucket_auto_granularity_needs_non_negative_numbers(coll):
    coll.insert_one({"v": -1})
    fails(coll, [{"$bucketAuto": {"groupBy": "$v", "buckets": 2, "granularity": "E6"}}], 40260)


def test_sample(coll):
    coll.insert_many([{"_id": i} for i in range(50)])
    out = list(coll.aggregate([{"$sample": {"size": 7}}]))
    assert len(out) == 7 and len({d["_id"] for d in out}) == 7
    assert len(list(coll.aggregate([{"$sample": {"size": 500}}]))) == 50
    seen = set()
    for _ in range(40):
        seen.update(d["_id"] for d in coll.aggregate([{"$sample": {"size": 2}}]))
    assert len(seen) > 20, "samples must differ between runs"
    fails(coll, [{"$sample": {"size": -1}}], 28747)
    fails(coll, [{"$sample": {}}], 28749)
    fails(coll, [{"$sample": {"size": "a"}}], 28746)
    fails(coll, [{"$sample": 5}], 28745)


def test_sample_of_a_large_collection_is_drawn_at_random(coll):
    """A first-stage $sample of under 5 % of more than 100 documents is drawn by a
    random cursor (no scan): distinct documents from all over the collection, the rest
    of the pipeline applied to them."""
    coll.insert_many([{"_id": i, "half": i // 2000} for i in range(4000)])
    coll.delete_many({"_id": {"$gte": 1000, "$lt": 1900}})  # a gap of deleted records
    seen = set()
    for _ in range(30):
        out = list(coll.aggregate([{"$sample": {"size": 20}}, {"$project": {"half": 1}}]))
        assert len(out) == 20 and len({d["_id"] for d in out}) == 20
        seen.update(d["_id"] for d in out)
    assert {d_id // 2000 for d_id in seen} == {0, 1}
    assert len(seen) > 300, "draws must differ"
    assert not seen & set(range(1000, 1900))
    db = coll.database
    db.command("profile", 2)
    grouped = list(coll.aggregate([{"$sample": {"size": 50}}, {"$count": "n"}]))
    db.command("profile", 0)
    assert grouped == [{"n": 50}]
    entry = db["system.profile"].find_one({"command.aggregate": coll.name})
    assert entry["docsExamined"] == 50, "the sample reads its documents, not the collection"


def test_redact(coll):
    coll.insert_one(
        {
            "_id": 1,
            "level": 1,
            "public": {"level": 1, "text": "hi"},
            "secret": {"level": 5, "text": "no"},
            "notes": [{"level": 9}, {"level": 0, "n": 1}, "plain"],
        }
    )
    out = list(
        coll.aggregate([{"$redact": {"$cond": [{"$lte": ["$level", 3]}, "$$DESCEND", "$$PRUNE"]}}])
    )
    assert out == [
        {
            "_id": 1,
            "level": 1,
            "public": {"level": 1, "text": "hi"},
            "notes": [{"level": 0, "n": 1}, "plain"],
        }
    ]
    assert list(coll.aggregate([{"$redact": "$$KEEP"}, {"$project": {"_id": 1}}])) == [{"_id": 1}]
    assert list(coll.aggregate([{"$redact": "$$PRUNE"}])) == []
    fails(coll, [{"$redact": "$level"}], 17053)


# --- $setWindowFields --------------------------------------------------------------


@pytest.fixture
def sales(coll):
    day = datetime.datetime(2024, 1, 1)
    coll.insert_many(
        [
            {"_id": i, "shop": shop, "day": day + datetime.timedelta(days=d), "n": n}
            for i, (shop, d, n) in enumerate(
                [("a", 0, 5), ("a", 1, 7), ("a", 3, 7), ("a", 4, 1), ("b", 0, 2), ("b", 2, 4)]
            )
        ]
    )
    return coll


def windowed(collection, output: dict, sort=None, partition="$shop") -> list:
    stage = {"output": output, "sortBy": sort or {"day": 1}}
    if partition is not None:
        stage["partitionBy"] = partition
    out = collection.aggregate([{"$setWindowFields": stage}])
    return [{k: v for k, v in d.items() if k in output} for d in out]


def column(collection, spec: dict, **kwargs) -> list:
    return [d["f"] for d in windowed(collection, {"f": spec}, **kwargs)]


def test_window_accumulators(sales):
    assert column(sales, {"$sum": "$n"}) == [20, 20, 20, 20, 6, 6]
    assert column(sales, {"$sum": "$n", "window": {"documents": ["unbounded", "current"]}}) == [
        5,
        12,
        19,
        20,
        2,
        6,
    ]
    assert column(sales, {"$avg": "$n", "window": {"documents": [-1, 0]}}) == [5, 6, 7, 4, 2, 3]
    assert column(sales, {"$push": "$n", "window": {"range": [-1, 0], "unit": "day"}}) == [
        [5],
        [5, 7],
        [7],
        [7, 1],
        [2],
        [4],
    ]
    assert column(
        sales,
        {"$topN": {"n": 2, "sortBy": {"n": -1}, "output": "$n"}, "window": {"documents": [0, 1]}},
    ) == [[7, 5], [7, 7], [7, 1], [1], [4, 2], [4]]
    assert column(sales, {"$maxN": {"n": 1, "input": "$n"}}) == [[7]] * 4 + [[4]] * 2


def test_window_ranks_and_shift(sales):
    out = windowed(
        sales,
        {
            "rank": {"$rank": {}},
            "dense": {"$denseRank": {}},
            "number": {"$documentNumber": {}},
            "prev": {"$shift": {"output": "$n", "by": -1, "default": 0}},
        },
        sort={"n": -1},
    )
    assert out == [
        {"rank": 1, "dense": 1, "number": 1, "prev": 0},
        {"rank": 1, "dense": 1, "number": 2, "prev": 7},
        {"rank": 3, "dense": 2, "number": 3, "prev": 7},
        {"rank": 4, "dense": 3, "number": 4, "prev": 5},
        {"rank": 1, "dense": 1, "number": 1, "prev": 0},
        {"rank": 2, "dense": 2, "number": 2, "prev": 4},
    ]


def test_window_calculus_and_statistics(sales):
    assert column(
        sales, {"$derivative": {"input": "$n", "unit": "day"}, "window": {"documents": [-1, 0]}}
    ) == [None, 2.0, 0.0, -6.0, None, 1.0]
    assert column(
        sales,
        {
            "$integral": {"input": "$n", "unit": "day"},
            "window": {"documents": ["unbounded", "current"]},
        },
    ) == [0.0, 6.0, 20.0, 24.0, 0.0, 6.0]
    assert column(sales, {"$expMovingAvg": {"input": "$n", "N": 3}}) == [
        5.0,
        6.0,
        6.5,
        3.75,
        2.0,
        3.0,
    ]
    assert column(sales, {"$covariancePop": ["$n", "$n"], "window": {"documents": [0, 1]}}) == [
        1.0,
        0.0,
        9.0,
        0.0,
        1.0,
        0.0,
    ]
    assert (
        column(sales, {"$covarianceSamp": ["$n", "$n"], "window": {"documents": [0, 0]}})
        == [None] * 6
    )


def test_window_gap_fillers(coll):
    coll.insert_many(
        [{"t": 1, "v": 10.0}, {"t": 2}, {"t": 3, "v": None}, {"t": 5, "v": 50.0}, {"t": 6}]
    )
    assert column(coll, {"$locf": "$v"}, sort={"t": 1}, partition=None) == [
        10.0,
        10.0,
        10.0,
        50.0,
        50.0,
    ]
    assert column(coll, {"$linearFill": "$v"}, sort={"t": 1}, partition=None) == [
        10.0,
        20.0,
        30.0,
        50.0,
        None,
    ]


@pytest.mark.parametrize(
    "stage, code",
    [
        (
            {"output": {"f": {"$sum": "$n", "window": {"documents": [1, 0]}}}, "sortBy": {"n": 1}},
            5339900,
        ),
        ({"output": {"f": {"$sum": "$n", "window": {"documents": [0, 1]}}}}, 5339901),
        (
            {
                "output": {"f": {"$sum": "$n", "window": {"range": [0, 1]}}},
                "sortBy": {"a": 1, "b": 1},
            },
            5339902,
        ),
        ({"output": {"f": {"$rank": {}}}}, 5371602),
        (
            {"output": {"f": {"$rank": {}, "window": {"documents": [0, 1]}}}, "sortBy": {"n": 1}},
            5371601,
        ),
        ({"output": {"f": {"$denseRank": 1}}, "sortBy": {"n": 1}}, 5371603),
        (
            {
                "output": {"f": {"$integral": {"input": "$n", "unit": "month"}}},
                "sortBy": {"day": 1},
            },
            5490710,
        ),
        ({"output": {"f": {"$summ": "$n"}}}, 9),
        ({"output": {"f": {"$shift": {"output": "$n", "by": 1.5}}}, "sortBy": {"n": 1}}, 9),
        ({"output": {"f": {"$expMovingAvg": {"input": "$n", "alpha": 2}}}, "sortBy": {"n": 1}}, 9),
        ({"output": {"f": {"$derivative": {"input": "$n"}}}, "sortBy": {"n": 1}}, 9),
        ({"partitionBy": "$shop"}, 40414),
        ({"output": {}, "bogus": 1}, 40415),
    ],
)
def test_window_errors(sales, stage, code):
    fails(sales, [{"$setWindowFields": stage}], code)


def test_range_window_needs_numbers(sales):
    stage = {"sortBy": {"shop": 1}, "output": {"f": {"$sum": "$n", "window": {"range": [-1, 0]}}}}
    fails(sales, [{"$setWindowFields": stage}], 5429413)


# --- $densify and $fill ------------------------------------------------------------


def test_densify_numbers(coll):
    coll.insert_many([{"_id": 1, "v": 0}, {"_id": 2, "v": 3}, {"_id": 3, "v": 9}, {"_id": 4}])
    out = list(
        coll.aggregate(
            [
                {"$densify": {"field": "v", "range": {"step": 2, "bounds": [0, 8]}}},
                {"$project": {"_id": 0}},
            ]
        )
    )
    assert out == [{}, {"v": 0}, {"v": 2}, {"v": 3}, {"v": 4}, {"v": 6}, {"v": 9}]
    full = list(
        coll.aggregate([{"$densify": {"field": "v", "range": {"step": 4, "bounds": "full"}}}])
    )
    assert [d.get("v") for d in full] == [None, 0, 3, 4, 8, 9]


def test_densify_dates_by_partition(coll):
    start = datetime.datetime(2024, 1, 1)
    coll.insert_many(
        [
            {"k": "a", "at": start},
            {"k": "a", "at": start + datetime.timedelta(hours=3)},
            {"k": "b", "at": start + datetime.timedelta(hours=1)},
        ]
    )
    out = list(
        coll.aggregate(
            [
                {
                    "$densify": {
                        "field": "at",
                        "partitionByFields": ["k"],
                        "range": {"step": 1, "unit": "hour", "bounds": "full"},
                    }
                },
                {"$project": {"_id": 0}},
            ]
        )
    )
    hours = [(d["k"], (d["at"] - start).seconds // 3600) for d in out]
    assert hours == [("a", 0), ("a", 1), ("a", 2), ("a", 3), ("b", 0), ("b", 1), ("b", 2), ("b", 3)]


@pytest.mark.parametrize(
    "spec, code",
    [
        ({"field": "v", "range": {"step": 0, "bounds": "full"}}, 5733401),
        ({"field": "v", "range": {"step": 1, "bounds": "partition"}}, 5733408),
        ({"field": "v", "range": {"step": 1, "bounds": [5, 1]}}, 5733402),
        ({"field": "v", "range": {"step": 1, "bounds": "everything"}}, 5946802),
        ({"field": "v", "range": {"step": 1, "unit": "day", "bounds": [1, 5]}}, 5733409),
        ({"range": {"step": 1, "bounds": "full"}}, 40414),
    ],
)
def test_densify_errors(coll, spec, code):
    coll.insert_one({"v": 1})
    fails(coll, [{"$densify": spec}], code)


def test_densify_refuses_unit_mismatches(coll):
    coll.insert_one({"v": 1})
    fails(
        coll,
        [{"$densify": {"field": "v", "range": {"step": 1, "unit": "day", "bounds": "full"}}}],
        6053600,
    )


def test_fill(coll):
    coll.insert_many(
        [
            {"_id": 1, "t": 1, "k": "a", "x": 1, "y": 10.0},
            {"_id": 2, "t": 2, "k": "a", "x": None},
            {"_id": 3, "t": 3, "k": "a", "x": 3, "y": 30.0},
            {"_id": 4, "t": 1, "k": "b"},
        ]
    )
    out = list(
        coll.aggregate(
            [
                {
                    "$fill": {
                        "sortBy": {"t": 1},
                        "partitionByFields": ["k"],
                        "output": {
                            "x": {"method": "locf"},
                            "y": {"method": "linear"},
                            "z": {"value": 0},
                        },
                    }
                },
                {"$project": {"_id": 1, "x": 1, "y": 1, "z": 1}},
            ]
        )
    )
    assert out == [
        {"_id": 1, "x": 1, "y": 10.0, "z": 0},
        {"_id": 2, "x": 1, "y": 20.0, "z": 0},
        {"_id": 3, "x": 3, "y": 30.0, "z": 0},
        {"_id": 4, "x": None, "y": None, "z": 0},
    ]


@pytest.mark.parametrize(
    "spec, code",
    [
        ({"output": {}}, 6050203),
        ({"output": {"x": {"method": "spline"}}}, 6050202),
        ({"output": {"x": {"method": "locf", "value": 1}}}, 6050201),
        ({"partitionBy": "$k", "partitionByFields": ["k"], "output": {"x": {"value": 1}}}, 6050204),
        ({"output": {"x": {"method": "linear"}}}, 9),
    ],
)
def test_fill_errors(coll, spec, code):
    coll.insert_one({"x": 1})
    fails(coll, [{"$fill": spec}], code)


# --- $collStats and $indexStats ----------------------------------------------------


def test_coll_stats(db, coll):
    coll.insert_many([{"a": i, "pad": "x" * 100} for i in range(10)])
    [out] = coll.aggregate(
        [
            {
                "$collStats": {
                    "storageStats": {"scale": 2},
                    "count": {},
                    "latencyStats": {"histograms": True},
                }
            }
        ]
    )
    assert out["ns"] == f"{db.name}.c"
    assert out["count"] == 10
    assert out["storageStats"]["count"] == 10
    assert out["storageStats"]["scaleFactor"] == 2
    assert out["storageStats"]["size"] == db.command("collStats", "c", scale=2)["size"]
    assert set(out["latencyStats"]) == {"reads", "writes", "commands", "transactions"}
    assert "histogram" in out["latencyStats"]["reads"]


def test_coll_stats_latencies_count_the_operations_on_the_collection(db, coll):
    coll.insert_many([{"a": i} for i in range(10)])  # one insert command
    coll.update_one({"a": 1}, {"$set": {"b": 1}})
    for _ in range(3):
        list(coll.find({"a": {"$gt": 2}}))
    coll.count_documents({})
    coll.create_index("a")
    db.other.insert_one({"x": 1})  # another collection's operations are its own

    def latency(histograms=False):
        stage = {"$collStats": {"latencyStats": {"histograms": histograms}}}
        return next(coll.aggregate([stage]))["latencyStats"]

    stats = latency(histograms=True)
    # The aggregate running $collStats is not finished yet: it is not counted.
    assert stats["reads"]["ops"] == 4
    assert stats["writes"]["ops"] == 2
    assert stats["commands"]["ops"] == 1
    assert stats["transactions"]["ops"] == 0
    for section in ("reads", "writes", "commands"):
        assert stats[section]["latency"] > 0
        histogram = stats[section]["histogram"]
        assert sum(b["count"] for b in histogram) == stats[section]["ops"]
        assert [b["micros"] for b in histogram] == sorted(b["micros"] for b in histogram)
    assert latency()["reads"]["ops"] == 5
    assert "histogram" not in latency()["reads"]
    fails(db.missing, [{"$collStats": {"storageStats": {}}}], 26)
    fails(coll, [{"$match": {}}, {"$collStats": {}}], 40602)
    fails(coll, [{"$collStats": {"bogus": {}}}], 40415)
    fails(coll, [{"$facet": {"s": [{"$collStats": {}}]}}], 40600)
    with pytest.raises(OperationFailure) as info:
        db.aggregate([{"$collStats": {}}])
    assert info.value.code == 73


def test_index_stats(coll):
    coll.insert_one({"a": 1})
    coll.create_index([("a", -1)], name="a_desc")
    out = list(coll.aggregate([{"$indexStats": {}}, {"$sort": {"name": 1}}]))
    assert [d["name"] for d in out] == ["_id_", "a_desc"]
    assert out[1]["key"] == {"a": -1}
    assert out[1]["spec"]["key"] == {"a": -1}
    assert set(out[1]["accesses"]) == {"ops", "since"}
    # Each operation whose plan reads an index counts once for it.
    before = out[1]["accesses"]["ops"]
    coll.find_one({"a": 1})
    coll.count_documents({"a": {"$gt": 0}})
    list(coll.find({"b": 1}))
    # explain plans but runs nothing: it counts no use.
    coll.database.command(
        "explain",
        {"aggregate": coll.name, "pipeline": [{"$match": {"a": 1}}, {"$count": "n"}], "cursor": {}},
    )
    out = list(coll.aggregate([{"$indexStats": {}}, {"$sort": {"name": 1}}]))
    assert out[1]["accesses"]["ops"] == before + 2
    fails(coll, [{"$limit": 1}, {"$indexStats": {}}], 40602)
    fails(coll, [{"$indexStats": {"x": 1}}], 28803)


def rrf(*parts: tuple[float, int]) -> float:
    """Reciprocal rank fusion's score: the sum of weight / (60 + rank)."""
    return sum(weight / (60 + rank) for weight, rank in parts)


def test_rank_fusion(scores):
    """$rankFusion (MongoDB 8.1): ranks by each pipeline's last $sort, shared ranks for
    ties, weights, the best score first and ties by _id, with the score and its details
    as metadata."""
    out = list(
        scores.aggregate(
            [
                {
                    "$rankFusion": {
                        "input": {
                            "pipelines": {
                                "high": [{"$match": {"game": "g1"}}, {"$sort": {"score": -1}}],
                                "ann": [{"$match": {"player": "ann"}}, {"$sort": {"score": 1}}],
                            }
                        },
                        "combination": {"weights": {"ann": 2}},
                        "scoreDetails": True,
                    }
                },
                {"$project": {"score": {"$meta": "score"}, "why": {"$meta": "scoreDetails"}}},
            ]
        )
    )
    # g1 by score: cy 57 (1), ann 31 (2), bob 12 (3), dee null (4); ann's: 8 (1), 31 (2).
    assert [(d["_id"], d["score"]) for d in out] == [
        (1, rrf((2, 2), (1, 2))),
        (5, rrf((2, 1))),
        (3, rrf((1, 1))),
        (2, rrf((1, 3))),
        (4, rrf((1, 4))),
    ]
    assert out[0]["why"]["details"] == [
        {"inputPipelineName": "ann", "rank": 2, "weight": 2.0, "details": []},
        {"inputPipelineName": "high", "rank": 2, "weight": 1.0, "details": []},
    ]
    assert out[1]["why"]["details"][1] == {"inputPipelineName": "high", "rank": "NA"}
    # Equal sort keys share a rank, and the metadata does not leak into $facet's arrays.
    tied = list(
        scores.aggregate(
            [
                {
                    "$facet": {
                        "f": [
                            {
                                "$rankFusion": {
                                    "input": {"pipelines": {"p": [{"$sort": {"game": 1}}]}}
                                }
                            },
                            {"$limit": 4},
                        ]
                    }
                }
            ]
        )
    )
    assert tied == [{"f": SCORES[:4]}]


@pytest.mark.parametrize(
    ("stage", "code"),
    [
        ({"$rankFusion": 1}, 9),
        ({"$rankFusion": {}}, 40414),
        ({"$rankFusion": {"input": {"pipelines": {}}}}, 2),
        ({"$rankFusion": {"input": {"pipelines": {"p": []}}}}, 9834300),
        ({"$rankFusion": {"input": {"pipelines": {"p": [{"$match": {}}]}}}}, 9191100),
        (
            {
                "$rankFusion": {
                    "input": {"pipelines": {"p": [{"$sort": {"a": 1}}, {"$count": "n"}]}}
                }
            },
            9191103,
        ),
        (
            {
                "$rankFusion": {
                    "input": {"pipelines": {"p": [{"$sort": {"a": 1}}]}},
                    "combination": {"weights": {"p": -1}},
                }
            },
            9460300,
        ),
        (
            {
                "$rankFusion": {
                    "input": {"pipelines": {"p": [{"$sort": {"a": 1}}]}},
                    "combination": {"weights": {"q": 1}},
                }
            },
            9967500,
        ),
    ],
)
def test_rank_fusion_errors(scores, stage, code):
    fails(scores, [stage], code)
    # Not the first stage.
    fails(scores, [{"$match": {}}, stage], 10170100)


def test_list_cluster_catalog(client, db, coll):
    """$listClusterCatalog (MongoDB 8.0) lists the database's collections and views with
    their namespace (every database's from admin), and runs only on a database."""
    coll.insert_one({"_id": 1})
    db.create_collection("v", viewOn=coll.name, pipeline=[])
    listed = {
        d["ns"]: d
        for d in db.aggregate([{"$listClusterCatalog": {"shards": True}}])
        if d["ns"] in (f"{db.name}.{coll.name}", f"{db.name}.v")
    }
    table = listed[f"{db.name}.{coll.name}"]
    assert (table["db"], table["type"], table["sharded"], table["shards"]) == (
        db.name,
        "collection",
        False,
        [],
    )
    assert table["idIndex"] == {"v": 2, "key": {"_id": 1}, "name": "_id_"}
    assert listed[f"{db.name}.v"]["type"] == "view"
    assert listed[f"{db.name}.v"]["info"] == {"readOnly": True}
    everywhere = {d["ns"] for d in client.admin.aggregate([{"$listClusterCatalog": {}}])}
    assert f"{db.name}.{coll.name}" in everywhere
    with pytest.raises(OperationFailure) as info:
        list(coll.aggregate([{"$listClusterCatalog": {}}]))
    assert info.value.code == 9621301
    with pytest.raises(OperationFailure) as info:
        list(db.aggregate([{"$listClusterCatalog": 1}]))
    assert info.value.code == 9621302
    # The catalog is read as it is now: local read concern only.
    with raises_code("InvalidOptions"):
        db.command(
            "aggregate",
            1,
            pipeline=[{"$listClusterCatalog": {}}],
            cursor={},
            readConcern={"level": "majority"},
        )


def test_rank_fusion_refuses_time_series(db):
    """$rankFusion on a time-series collection, or on its buckets, is 10557301."""
    db.create_collection("ts", timeseries={"timeField": "t"})
    stage = {"$rankFusion": {"input": {"pipelines": {"p": [{"$sort": {"t": 1}}]}}}}
    for name in ("ts", "system.buckets.ts"):
        with pytest.raises(OperationFailure) as info:
            list(db[name].aggregate([stage]))
        assert info.value.code == 10557301, name


def test_array_accumulators(coll):
    """MongoDB 8.1's $concatArrays (in order, duplicates kept) and $setUnion (each
    element once) accumulators; a value that is not an array is TypeMismatch."""
    coll.insert_many([{"_id": 1, "a": [1, 2]}, {"_id": 2, "a": [2, 3]}, {"_id": 3}])
    out = list(
        coll.aggregate(
            [
                {"$sort": {"_id": 1}},
                {
                    "$group": {
                        "_id": None,
                        "all": {"$concatArrays": "$a"},
                        "set": {"$setUnion": "$a"},
                    }
                },
            ]
        )
    )
    assert out[0]["all"] == [1, 2, 2, 3]
    assert sorted(out[0]["set"]) == [1, 2, 3]
    coll.insert_one({"_id": 4, "a": 5})
    for operator in ("$concatArrays", "$setUnion"):
        fails(coll, [{"$group": {"_id": None, "r": {operator: "$a"}}}], 14)
        fails(coll, [{"$group": {"_id": None, "r": {operator: ["$a"]}}}], 40237)
