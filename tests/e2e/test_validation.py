"""Schema validation: a collection's `validator` (query operators or `$jsonSchema`) is
checked on every insert, update, upsert and findAndModify; a failing document gets
DocumentValidationFailure (121) with MongoDB's `errInfo` (its `_id` and the rules it
broke). `validationLevel` (strict, moderate, off), `validationAction` (error, warn)
and `bypassDocumentValidation` behave as in MongoDB, and collMod changes them.
"""

from __future__ import annotations

import pytest
from pymongo.errors import BulkWriteError, OperationFailure, WriteError

from helpers import ids, raises_code

INT_X = {"$jsonSchema": {"required": ["x"], "properties": {"x": {"bsonType": "int"}}}}


@pytest.fixture
def checked(db):
    db.create_collection("checked", validator=INT_X)
    db.checked.insert_one({"_id": 1, "x": 1})
    return db.checked


def test_the_options_are_listed_with_their_defaults(checked):
    options = next(c for c in checked.database.list_collections() if c["name"] == "checked")
    assert options["options"] == {
        "validator": INT_X,
        "validationLevel": "strict",
        "validationAction": "error",
    }


def test_an_invalid_insert_is_refused_with_the_broken_rules(checked):
    with pytest.raises(WriteError) as refused:
        checked.insert_one({"_id": 2, "x": "one"})
    error = refused.value.details
    assert error["code"] == 121
    info = error["errInfo"]
    assert info["failingDocumentId"] == 2
    assert info["details"]["operatorName"] == "$jsonSchema"
    rule = info["details"]["schemaRulesNotSatisfied"][0]
    assert rule["operatorName"] == "properties"
    property_rule = rule["propertiesNotSatisfied"][0]
    assert property_rule["propertyName"] == "x"
    assert property_rule["details"][0]["consideredType"] == "string"
    missing = pytest.raises(WriteError, checked.insert_one, {"_id": 3})
    assert missing.value.details["errInfo"]["details"]["schemaRulesNotSatisfied"][0] == {
        "operatorName": "required",
        "specifiedAs": {"required": ["x"]},
        "missingProperties": ["x"],
    }
    assert ids(checked.find()) == [1]


def test_unordered_inserts_keep_the_valid_documents(checked):
    with pytest.raises(BulkWriteError) as refused:
        checked.insert_many(
            [{"_id": 2, "x": 2}, {"_id": 3, "x": "no"}, {"_id": 4, "x": 4}], ordered=False
        )
    assert [e["index"] for e in refused.value.details["writeErrors"]] == [1]
    assert ids(checked.find().sort("_id", 1)) == [1, 2, 4]


def test_updates_upserts_and_find_and_modify_are_checked(checked):
    with raises_code("DocumentValidationFailure"):
        checked.update_one({"_id": 1}, {"$set": {"x": "s"}})
    with raises_code("DocumentValidationFailure"):
        checked.update_one({"_id": 9}, {"$set": {"y": 1}}, upsert=True)
    with raises_code("DocumentValidationFailure"):
        checked.find_one_and_update({"_id": 1}, {"$unset": {"x": ""}})
    checked.update_one({"_id": 1}, {"$inc": {"x": 1}})
    assert checked.find_one({"_id": 1}) == {"_id": 1, "x": 2}


def test_bypass_document_validation(checked):
    checked.insert_one({"_id": 2, "x": "text"}, bypass_document_validation=True)
    checked.update_one({"_id": 1}, {"$set": {"x": []}}, bypass_document_validation=True)
    assert checked.count_documents({"x": {"$type": "int"}}) == 0


def test_moderate_level_lets_invalid_documents_be_updated(checked):
    checked.insert_one({"_id": 2, "x": "old"}, bypass_document_validation=True)
    checked.database.command("collMod", "checked", validationLevel="moderate")
    checked.update_one({"_id": 2}, {"$set": {"y": 1}})
    with raises_code("DocumentValidationFailure"):
        checked.update_one({"_id": 1}, {"$set": {"x": "now invalid"}})


def test_warn_action_writes_the_document(checked):
    checked.database.command("collMod", "checked", validationAction="warn")
    checked.insert_one({"_id": 2, "x": "logged"})
    assert checked.count_documents({}) == 2


def test_query_operator_validators_and_their_details(db):
    db.create_collection("ops", validator={"qty": {"$gte": 0}, "sku": {"$type": "string"}})
    with pytest.raises(WriteError) as refused:
        db.ops.insert_one({"_id": 1, "qty": -1, "sku": "a"})
    details = refused.value.details["errInfo"]["details"]
    assert details["operatorName"] == "$and"
    assert details["clausesNotSatisfied"] == [
        {
            "index": 0,
            "details": {
                "operatorName": "$gte",
                "specifiedAs": {"qty": {"$gte": 0}},
                "reason": "comparison failed",
                "consideredValue": -1,
            },
        }
    ]
    db.command("collMod", "ops", validator={})
    db.ops.insert_one({"_id": 1, "qty": -1})


@pytest.mark.parametrize(
    ("validator", "code"),
    [
        ({"$text": {"$search": "x"}}, 2),
        ({"loc": {"$near": [0, 0]}}, 5626500),
        ({"$where": "true"}, 2),
        ({"a": {"$badOp": 1}}, 2),
        ({"$jsonSchema": {"unknownKeyword": 1}}, 9),
        ("not an object", 14),
    ],
)
def test_invalid_validators_are_refused(db, validator, code):
    with pytest.raises(OperationFailure) as refused:
        db.create_collection("bad", validator=validator)
    assert refused.value.code == code


def test_levels_and_actions_are_checked(db):
    with raises_code("BadValue"):
        db.command("create", "c", validator={"a": 1}, validationLevel="STRICT")
    with raises_code("BadValue"):
        db.command("create", "c", validator={"a": 1}, validationAction="fail")


def test_out_and_merge_write_valid_documents_only(checked):
    source = checked.database.source
    source.insert_many([{"_id": 10, "x": "text"}])
    with raises_code("DocumentValidationFailure"):
        list(source.aggregate([{"$merge": {"into": "checked"}}]))
    with raises_code("DocumentValidationFailure"):
        list(source.aggregate([{"$out": "checked"}]))
    assert ids(checked.find()) == [1]
    list(source.aggregate([{"$merge": {"into": "checked"}}], bypassDocumentValidation=True))
    assert ids(checked.find().sort("_id", 1)) == [1, 10]
