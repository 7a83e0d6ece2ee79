"""`$expr`, the `let` option, aggregation expressions in find projections, and
pipeline-style updates, as pymongo applications use them.

Each feature is driven through the driver's own helpers (`find(..., let=...)`,
`update_one(filter, [stages])`, ...), so the command shapes are the ones real
applications send; the error cases check MongoDB's code (and codeName for command
errors, which drivers and applications branch on).
"""

from __future__ import annotations

import datetime

import pytest
from bson import DBRef, Int64
from pymongo import ReturnDocument
from pymongo.errors import OperationFailure, WriteError

PEOPLE = [
    {"_id": 1, "name": "ann", "spent": 120, "budget": 100, "tags": ["a", "b"]},
    {"_id": 2, "name": "bob", "spent": 80, "budget": 100, "tags": []},
    {"_id": 3, "name": "cy", "spent": 100, "budget": 90, "tags": ["c"]},
]


@pytest.fixture
def people(coll):
    coll.insert_many(PEOPLE)
    return coll


def expect_error(block, code: int, code_name: str | None = None, message: str | None = None):
    """Runs `block`, expecting a MongoDB error with `code` (and codeName for command
    errors; write errors carry only the code)."""
    with pytest.raises(OperationFailure) as info:
        block()
    error = info.value
    assert error.code == code, error.details
    if code_name is not None and not isinstance(error, WriteError):
        assert error.details.get("codeName") == code_name, error.details
    if message is not None:
        assert message in str(error.details.get("errmsg")), error.details
    return error


def update_statement_error(db, statement: dict) -> dict:
    """The write error of a raw one-statement `update` command (a write error is part of
    the reply, not a command failure)."""
    reply = db.command("update", "c", updates=[statement])
    assert reply["n"] == 0 and len(reply["writeErrors"]) == 1, reply
    return reply["writeErrors"][0]


def ids(cursor) -> list:
    return [d["_id"] for d in cursor]


# $expr in filters


def test_expr_compares_fields_of_one_document(people):
    over = {"$expr": {"$gt": ["$spent", "$budget"]}}
    assert ids(people.find(over)) == [1, 3]
    assert ids(people.find({"$or": [over, {"name": "bob"}]}).sort("_id", 1)) == [1, 2, 3]
    assert ids(people.find({"name": {"$ne": "ann"}, **over})) == [3]
    assert ids(people.find({"$expr": {"$eq": [{"$size": "$tags"}, 0]}})) == [2]


def test_expr_in_count_distinct_and_delete(people, db):
    over = {"$expr": {"$gt": ["$spent", "$budget"]}}
    assert db.command("count", "c", query=over)["n"] == 2
    assert people.count_documents(over) == 2
    assert people.distinct("name", over) == ["ann", "cy"]
    assert people.delete_many(over).deleted_count == 2
    assert ids(people.find()) == [2]


def test_expr_evaluation_error_fails_the_query(people):
    expect_error(
        lambda: list(people.find({"$expr": {"$add": ["$name", 1]}})),
        14,
        "TypeMismatch",
        "only supports numeric or date types",
    )


def test_expr_is_refused_inside_elem_match_and_array_filters(people):
    expect_error(
        lambda: list(people.find({"tags": {"$elemMatch": {"$expr": True}}})),
        2,
        "BadValue",
        "$expr can only be applied to the top-level document",
    )
    expect_error(
        lambda: people.update_one(
            {"_id": 1},
            {"$set": {"tags.$[t]": "z"}},
            array_filters=[{"t": "a", "$expr": True}],
        ),
        224,
        message="$expr is not allowed in this context",
    )


def test_sample_rate(people):
    assert ids(people.find({"$sampleRate": 1})) == [1, 2, 3]
    assert ids(people.find({"$sampleRate": 0})) == []
    expect_error(lambda: list(people.find({"$sampleRate": 2})), 2, "BadValue")


# the let option


def test_find_let_variables_in_filter_and_projection(people):
    found = list(
        people.find(
            {"$expr": {"$eq": ["$name", "$$who"]}},
            {"_id": 0, "name": 1, "left": {"$subtract": ["$$limit", "$spent"]}, "who": "$$who"},
            let={"who": "bob", "limit": {"$add": [100, 50]}},
        )
    )
    assert found == [{"name": "bob", "left": 70, "who": "bob"}]


def test_now_is_one_instant_for_the_command(people):
    before = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    found = list(people.find({"$expr": {"$lte": ["$$NOW", "$$NOW"]}}, {"now": "$$NOW"}))
    after = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    assert len({d["now"] for d in found}) == 1
    now = found[0]["now"]
    assert before - datetime.timedelta(seconds=1) <= now <= after + datetime.timedelta(seconds=1)


def test_let_in_update_delete_and_find_and_modify(people):
    result = people.update_many(
        {"$expr": {"$lt": ["$spent", "$$cap"]}}, {"$inc": {"spent": 1}}, let={"cap": 110}
    )
    assert (result.matched_count, result.modified_count) == (2, 2)
    doc = people.find_one_and_update(
        {"$expr": {"$eq": ["$_id", "$$id"]}},
        [{"$set": {"note": "$$note"}}],
        let={"id": 3, "note": "hi"},
        return_document=ReturnDocument.AFTER,
    )
    assert doc["note"] == "hi"
    gone = people.find_one_and_delete({"$expr": {"$eq": ["$name", "$$n"]}}, let={"n": "ann"})
    assert gone["_id"] == 1
    assert people.delete_one({"$expr": {"$eq": ["$_id", "$$id"]}}, let={"id": 2}).deleted_count == 1
    assert ids(people.find()) == [3]


def test_let_errors(people, db):
    expect_error(lambda: list(people.find({}, let={"Upper": 1})), 9, "FailedToParse")
    expect_error(
        lambda: list(people.find({"$expr": {"$eq": ["$_id", "$$undefined"]}})),
        17276,
        "Location17276",
        "Use of undefined variable: undefined",
    )
    expect_error(lambda: db.command("find", "c", let=5), 14, "TypeMismatch")


# aggregation expressions in find projections


def test_projection_expressions(people):
    found = people.find_one(
        {"_id": 1},
        {
            "over": {"$subtract": ["$spent", "$budget"]},
            "label": {"$concat": ["$name", "!"]},
            "meta.count": {"$size": "$tags"},
            "constant": {"$literal": "$not_a_path"},
            "copy": "$$ROOT.name",
            "gone": "$$REMOVE",
        },
    )
    assert found == {
        "_id": 1,
        "over": 20,
        "label": "ann!",
        "meta": {"count": 2},
        "constant": "$not_a_path",
        "copy": "ann",
    }
    rand = people.find_one({"_id": 1}, {"r": {"$rand": {}}})["r"]
    assert isinstance(rand, float) and 0 <= rand < 1


def test_projection_expression_errors(people):
    expect_error(
        lambda: list(people.find({}, {"name": 0, "x": {"$add": [1, 2]}})),
        31252,
        "Location31252",
    )
    expect_error(
        lambda: list(people.find({}, {"x": {"$bogus": 1}})), 168, "InvalidPipelineOperator"
    )
    expect_error(lambda: list(people.find({}, {"x": {"$add": ["$name", 1]}})), 14)


# pipeline-style updates


def test_pipeline_update_many_counts_real_changes(people):
    result = people.update_many({}, [{"$project": {"name": 1}}, {"$addFields": {"seen": True}}])
    assert (result.matched_count, result.modified_count) == (3, 3)
    assert people.find_one({"_id": 2}) == {"_id": 2, "name": "bob", "seen": True}
    again = people.update_many({}, [{"$set": {"seen": True}}])
    assert (again.matched_count, again.modified_count) == (3, 0)


def test_pipeline_stages_reshape_the_document(people):
    people.update_one(
        {"_id": 1},
        [
            {"$set": {"total": {"$add": ["$spent", "$budget"]}, "name": {"$toUpper": "$name"}}},
            {"$unset": ["tags", "budget"]},
        ],
    )
    assert people.find_one({"_id": 1}) == {"_id": 1, "name": "ANN", "spent": 120, "total": 220}
    people.update_one({"_id": 2}, [{"$replaceWith": {"who": "$name"}}])
    assert people.find_one({"_id": 2}) == {"_id": 2, "who": "bob"}
    people.update_one({"_id": 3}, [{"$replaceRoot": {"newRoot": {"_id": "$_id", "n": 1}}}])
    assert people.find_one({"_id": 3}) == {"_id": 3, "n": 1}


def test_pipeline_sets_dollar_prefixed_and_dotted_keys(coll):
    coll.insert_one({"_id": 1, "foo": {}})
    coll.update_one(
        {"_id": 1},
        [
            {
                "$replaceWith": {
                    "$setField": {"field": {"$literal": "$a"}, "value": 1, "input": "$$ROOT"}
                }
            }
        ],
    )
    coll.update_one(
        {"_id": 1},
        [{"$set": {"foo": {"$setField": {"field": "a.b", "value": 2, "input": "$foo"}}}}],
    )
    assert coll.find_one() == {"_id": 1, "foo": {"a.b": 2}, "$a": 1}
    got = coll.find_one({}, {"_id": 0, "a": {"$getField": {"$literal": "$a"}}})
    assert got == {"a": 1}
    coll.update_one(
        {"_id": 1},
        [{"$replaceWith": {"$unsetField": {"field": {"$literal": "$a"}, "input": "$$ROOT"}}}],
    )
    assert coll.find_one() == {"_id": 1, "foo": {"a.b": 2}}


def test_pipeline_upsert_starts_from_the_query(coll):
    result = coll.update_one(
        {"_id": 7, "kind": "x"}, [{"$set": {"n": {"$add": [1, 1]}, "k": "$kind"}}], upsert=True
    )
    assert result.upserted_id == 7
    assert coll.find_one() == {"_id": 7, "kind": "x", "n": 2, "k": "x"}
    result = coll.update_one({"kind": "y"}, [{"$set": {"n": 1}}], upsert=True)
    stored = coll.find_one({"_id": result.upserted_id})
    assert list(stored) == ["_id", "kind", "n"]


def test_pipeline_with_let_and_constants(people, db):
    people.update_one({"_id": 1}, [{"$set": {"x": "$$x"}}], let={"x": "from let"})
    assert people.find_one({"_id": 1})["x"] == "from let"
    db.command(
        "update",
        "c",
        updates=[
            {"q": {"_id": 2}, "u": [{"$set": {"c": "$$k", "l": "$$x"}}], "c": {"k": {"$add": [1]}}}
        ],
        let={"x": "L"},
    )
    assert people.find_one({"_id": 2}, {"_id": 0, "c": 1, "l": 1}) == {"c": {"$add": [1]}, "l": "L"}
    people.update_one({"_id": 3}, [{"$set": {"at": "$$NOW"}}])
    assert isinstance(people.find_one({"_id": 3})["at"], datetime.datetime)


def test_pipeline_update_errors(people, db):
    expect_error(lambda: people.update_one({"_id": 1}, [{"$match": {}}]), 72, "InvalidOptions")
    expect_error(
        lambda: people.find_one_and_update({"_id": 1}, [{"$group": {"_id": None}}]),
        72,
        "InvalidOptions",
        "$group is not allowed to be used within an update",
    )
    expect_error(lambda: people.update_one({"_id": 1}, [{"$frob": {}}]), 40324)
    expect_error(
        lambda: people.update_one({"_id": 1}, [{"$set": {"_id": 5}}]), 66, "ImmutableField"
    )
    expect_error(
        lambda: people.update_one({"_id": 1}, [{"$set": {"a": 1}}], array_filters=[{"x": 1}]),
        9,
        message="arrayFilters may not be specified for pipeline-style updates",
    )
    constants = update_statement_error(db, {"q": {}, "u": {"$set": {"a": 1}}, "c": {"k": 1}})
    assert constants["code"] == 51198
    assert update_statement_error(db, {"q": {}, "u": [1]})["code"] == 14
    expect_error(
        lambda: people.update_one({"_id": 1}, [{"$set": {"a": {"$add": ["$name", 1]}}}]), 14
    )
    assert people.find_one({"_id": 1}) == PEOPLE[0]


def test_find_one_and_update_with_a_pipeline_returns_either_version(people):
    before = people.find_one_and_update(
        {"_id": 2}, [{"$set": {"spent": {"$multiply": ["$spent", 2]}}}]
    )
    assert before["spent"] == 80
    after = people.find_one_and_update(
        {"_id": 2},
        [{"$set": {"spent": {"$add": ["$spent", Int64(1)]}}}],
        projection={"_id": 0, "spent": 1, "double": {"$multiply": ["$spent", 2]}},
        return_document=ReturnDocument.AFTER,
    )
    assert after == {"spent": 161, "double": 322}


# statement fields: 8.0's sort, and fields mongod does not know


def test_update_statement_sort_picks_the_document(people, db):
    # 8.0's sort: a single-document update changes the first match in that order.
    people.update_one({"_id": {"$gt": 1}}, {"$inc": {"spent": 1}}, sort={"_id": -1})
    assert [d["spent"] for d in people.find()] == [120, 80, 101]
    # Not with multi, as the statement's own error.
    reply = db.command(
        "update",
        "c",
        updates=[{"q": {}, "u": {"$inc": {"spent": 1}}, "sort": {"_id": 1}, "multi": True}],
    )
    assert reply["n"] == 0 and reply["writeErrors"][0]["code"] == 9
    # mongod parses all statements first: one unknown field fails the whole command.
    expect_error(
        lambda: db.command(
            "update",
            "c",
            updates=[
                {"q": {"_id": 2}, "u": {"$inc": {"spent": 1}}},
                {"q": {"_id": 1}, "u": {"$inc": {"spent": 1}}, "bogus": 1},
            ],
            ordered=False,
        ),
        40415,
        "Location40415",
    )
    assert [d["spent"] for d in people.find()] == [120, 80, 101]


# insert: _id values that could not be queried


def test_insert_refuses_dollar_prefixed_fields_in_id(coll):
    expect_error(
        lambda: coll.insert_one({"_id": {"$a": 1}}),
        52,
        message="_id fields may not contain '$'-prefixed fields: $a is not valid for storage.",
    )
    expect_error(lambda: coll.insert_one({"_id": {"x": [{"$b": 1}]}}), 52)
    coll.insert_one({"_id": {"a.b": 1}})
    coll.insert_one({"_id": DBRef("other", 1)})
    coll.insert_one({"_id": 2, "$top": 1, "sub": {"$inner": 1}})
    assert coll.count_documents({}) == 3
