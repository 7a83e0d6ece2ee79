"""Date expression operators through the wire: $dateAdd/$dateSubtract, $dateDiff,
$dateTrunc, $dateToParts/$dateFromParts, $dateFromString/$dateToString, with Olson
time zones, and MongoDB's error codes for bad arguments.

Expected instants are written as UTC datetimes with the zone arithmetic spelled out
(New York is UTC-5 in winter and UTC-4 from the second Sunday of March), so each case
says why the answer is right.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from bson import Int64
from pymongo.errors import OperationFailure

T = datetime(2021, 3, 20, 11, 30, 5, 200_000)  # a Saturday
NY = "America/New_York"


def evaluate(coll, expr, doc=None):
    """The value of `expr` evaluated against one document."""
    coll.delete_many({})
    coll.insert_one({"_id": 1, "t": T, **(doc or {})})
    return next(coll.aggregate([{"$project": {"_id": 0, "v": expr}}]))["v"]


def expect_error(coll, expr, code, code_name=None):
    with pytest.raises(OperationFailure) as info:
        evaluate(coll, expr)
    assert info.value.code == code, info.value.details
    assert info.value.details.get("codeName") == (code_name or f"Location{code}")


@pytest.mark.parametrize(
    "spec,expected",
    [
        # Months clamp to the last day of the target month.
        ({"startDate": datetime(2020, 1, 31), "unit": "month", "amount": 1}, datetime(2020, 2, 29)),
        (
            {"startDate": datetime(2021, 3, 31), "unit": "quarter", "amount": 1},
            datetime(2021, 6, 30),
        ),
        ({"startDate": datetime(2020, 2, 29), "unit": "year", "amount": 1}, datetime(2021, 2, 28)),
        ({"startDate": "$t", "unit": "hour", "amount": -12}, T - timedelta(hours=12)),
        ({"startDate": "$t", "unit": "week", "amount": 2}, T + timedelta(weeks=2)),
        # Noon in New York the day before spring-forward, plus a day: still noon, now at
        # UTC-4, so only 23 hours later.
        (
            {"startDate": datetime(2021, 3, 13, 17), "unit": "day", "amount": 1, "timezone": NY},
            datetime(2021, 3, 14, 16),
        ),
        ({"startDate": "$missing", "unit": "day", "amount": 1}, None),
    ],
)
def test_date_add(coll, spec, expected):
    assert evaluate(coll, {"$dateAdd": spec}) == expected
    if expected is not None and "timezone" not in spec:
        back = {**spec, "startDate": expected}
        if spec["unit"] not in ("month", "quarter", "year"):  # clamping is not reversible
            assert evaluate(coll, {"$dateSubtract": back}) == evaluate(coll, spec["startDate"])


@pytest.mark.parametrize(
    "unit,expected",
    [
        ("year", 1),
        ("quarter", 1),
        ("month", 1),
        ("week", 0),
        ("day", 1),
        ("hour", 1),
        ("minute", 2),
        ("second", 120),
        ("millisecond", 120_000),
    ],
)
def test_date_diff_counts_boundaries(coll, unit, expected):
    spec = {
        "startDate": datetime(2020, 12, 31, 23, 59),
        "endDate": datetime(2021, 1, 1, 0, 1),
        "unit": unit,
    }
    result = evaluate(coll, {"$dateDiff": spec})
    assert result == expected and isinstance(result, Int64)


def test_date_diff_weeks_and_zones(coll):
    saturday, sunday = datetime(2021, 1, 2), datetime(2021, 1, 3)
    week = {"startDate": saturday, "endDate": sunday, "unit": "week"}
    assert evaluate(coll, {"$dateDiff": week}) == 1
    assert evaluate(coll, {"$dateDiff": {**week, "startOfWeek": "monday"}}) == 0
    # 03:00Z and 06:00Z on Jan 1 are Dec 31 22:00 and Jan 1 01:00 in New York.
    day = {"startDate": datetime(2021, 1, 1, 3), "endDate": datetime(2021, 1, 1, 6), "unit": "day"}
    assert evaluate(coll, {"$dateDiff": day}) == 0
    assert evaluate(coll, {"$dateDiff": {**day, "timezone": NY}}) == 1
    assert evaluate(coll, {"$dateDiff": {**day, "timezone": NY, "unit": "year"}}) == 1
    # Midnight to midnight across New York's spring-forward (05:00Z, then 04:00Z under
    # UTC-4) is one day of 23 hours.
    dst = {
        "startDate": datetime(2021, 3, 14, 5),
        "endDate": datetime(2021, 3, 15, 4),
        "timezone": NY,
    }
    assert evaluate(coll, {"$dateDiff": {**dst, "unit": "day"}}) == 1
    assert evaluate(coll, {"$dateDiff": {**dst, "unit": "hour"}}) == 23


@pytest.mark.parametrize(
    "spec,expected",
    [
        ({"unit": "minute", "binSize": 15}, datetime(2021, 3, 20, 11, 30)),
        ({"unit": "hour", "binSize": 2}, datetime(2021, 3, 20, 10)),
        ({"unit": "day"}, datetime(2021, 3, 20)),
        ({"unit": "week"}, datetime(2021, 3, 14)),
        ({"unit": "week", "startOfWeek": "mon"}, datetime(2021, 3, 15)),
        ({"unit": "month", "binSize": 6}, datetime(2021, 1, 1)),
        ({"unit": "quarter"}, datetime(2021, 1, 1)),
        ({"unit": "year", "binSize": 5}, datetime(2020, 1, 1)),
        # Midnight of March 20 in New York (UTC-4 by then) is 04:00Z.
        ({"unit": "day", "timezone": NY}, datetime(2021, 3, 20, 4)),
        ({"unit": "day", "binSize": None}, None),
    ],
)
def test_date_trunc(coll, spec, expected):
    assert evaluate(coll, {"$dateTrunc": {"date": "$t", **spec}}) == expected


def test_date_to_parts_and_back(coll):
    parts = evaluate(coll, {"$dateToParts": {"date": "$t", "timezone": NY}})
    assert parts == {
        "year": 2021,
        "month": 3,
        "day": 20,
        "hour": 7,
        "minute": 30,
        "second": 5,
        "millisecond": 200,
    }
    assert evaluate(coll, {"$dateFromParts": {**parts, "timezone": NY}}) == T
    iso = evaluate(coll, {"$dateToParts": {"date": "$t", "iso8601": True}})
    assert (iso["isoWeekYear"], iso["isoWeek"], iso["isoDayOfWeek"]) == T.isocalendar()
    assert evaluate(coll, {"$dateFromParts": iso}) == T


def test_date_from_parts_carries_over(coll):
    carried = {"year": 2017, "month": 14, "day": 0, "hour": 25, "minute": -1}
    # Month 14 of 2017 is February 2018; day 0 is the last of January; hour 25 is
    # 01:00 the next day, minute -1 steps back one minute.
    assert evaluate(coll, {"$dateFromParts": carried}) == datetime(2018, 2, 1, 0, 59)


def test_date_strings(coll):
    from_string = {"$dateFromString": {"dateString": "2021-03-20 07:30:05.2", "timezone": NY}}
    assert evaluate(coll, from_string) == T
    formatted = {"dateString": "20/Mar/2021 11h30m00", "format": "%d/%b/%Y %Hh%Mm%S"}
    assert evaluate(coll, {"$dateFromString": formatted}) == datetime(2021, 3, 20, 11, 30)
    bad = {"dateString": "2021-02-30", "onError": "invalid"}
    assert evaluate(coll, {"$dateFromString": bad}) == "invalid"
    assert evaluate(coll, {"$dateFromString": {"dateString": "$missing", "onNull": 0}}) == 0
    to_string = {"date": "$t", "format": "%G-W%V-%u %j %B %b %z %Z %%", "timezone": NY}
    assert evaluate(coll, {"$dateToString": to_string}) == "2021-W11-6 079 March Mar -0400 -240 %"
    assert (
        evaluate(coll, {"$dateToString": {"date": "$t", "timezone": NY}})
        == "2021-03-20T07:30:05.200"
    )
    assert evaluate(coll, {"$hour": {"date": "$t", "timezone": "Europe/London"}}) == 11


@pytest.mark.parametrize(
    "expr,code,code_name",
    [
        ({"$hour": {"date": "$t", "timezone": "Mars/Olympus_Mons"}}, 40485, None),
        ({"$dateAdd": {"startDate": "$t", "unit": "day"}}, 5166402, None),
        ({"$dateAdd": {"startDate": "$t", "unit": "day", "amount": 1.5}}, 5166405, None),
        ({"$dateAdd": {"startDate": "x", "unit": "day", "amount": 1}}, 5166403, None),
        ({"$dateAdd": {"startDate": "$t", "unit": "fortnight", "amount": 1}}, 9, "FailedToParse"),
        ({"$dateAdd": {"startDate": "$t", "unit": "day", "amount": 2**62}}, 5976500, None),
        ({"$dateAdd": {"startDate": "$t", "unit": "day", "amount": 2 * 10**11}}, 5166406, None),
        ({"$dateDiff": {"startDate": "$t", "unit": "day"}}, 5166304, None),
        ({"$dateDiff": {"startDate": "$t", "endDate": 1, "unit": "day"}}, 5166307, None),
        ({"$dateDiff": {"startDate": "$t", "endDate": "$t", "unit": 1}}, 5439013, None),
        (
            {"$dateDiff": {"startDate": "$t", "endDate": "$t", "unit": "week", "startOfWeek": "x"}},
            5439016,
            None,
        ),
        ({"$dateTrunc": {"date": "$t"}}, 5439010, None),
        ({"$dateTrunc": {"date": "$t", "unit": "day", "binSize": 0}}, 5439018, None),
        ({"$dateTrunc": {"date": "$t", "unit": "day", "binSize": "2"}}, 5439017, None),
        ({"$dateFromParts": {"year": 2021, "isoWeek": 3}}, 40489, None),
        ({"$dateFromParts": {"year": 10000}}, 40523, None),
        ({"$dateFromParts": {"year": 2021, "month": 40000}}, 31034, None),
        ({"$dateToParts": {"date": "$t", "iso8601": "yes"}}, 40521, None),
        ({"$dateFromString": {"dateString": "yesterday"}}, 241, "ConversionFailure"),
        ({"$dateFromString": {"dateString": "1", "format": "%w"}}, 18536, None),
        ({"$dateToString": {"date": "$t", "format": "%Q"}}, 18536, None),
    ],
)
def test_errors(coll, expr, code, code_name):
    expect_error(coll, expr, code, code_name)
