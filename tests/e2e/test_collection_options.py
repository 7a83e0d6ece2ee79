"""Collection options: create with clusteredIndex and changeStreamPreAndPostImages,
collMod, createIndexes/dropIndexes, and the options Basalt refuses by name."""

from __future__ import annotations

import pytest
from pymongo.errors import DuplicateKeyError, OperationFailure

from helpers import raises_code


def test_clustered_collection_reports_its_index(db):
    spec = {"key": {"_id": 1}, "unique": True, "name": "by id"}
    db.create_collection("c", clusteredIndex=spec)
    listed = db.command("listCollections", filter={"name": "c"})["cursor"]["firstBatch"]
    assert listed[0]["options"]["clusteredIndex"] == {**spec, "v": 2}
    indexes = list(db.c.list_indexes())
    assert indexes == [
        {"v": 2, "key": {"_id": 1}, "name": "by id", "unique": True, "clustered": True}
    ]
    db.c.insert_one({"_id": 1})
    with pytest.raises(DuplicateKeyError):
        db.c.insert_one({"_id": 1})


@pytest.mark.parametrize(
    "spec",
    [{"key": {"a": 1}, "unique": True}, {"key": {"_id": 1}, "unique": False}],
)
def test_clustered_index_must_be_unique_on_id(db, spec):
    with pytest.raises(OperationFailure):
        db.create_collection("c", clusteredIndex=spec)
    assert "c" not in db.list_collection_names()


def test_pre_and_post_images_option_and_coll_mod(db):
    db.create_collection("c", changeStreamPreAndPostImages={"enabled": False})
    db.command("collMod", "c", changeStreamPreAndPostImages={"enabled": True})
    options = db.command("listCollections", filter={"name": "c"})["cursor"]["firstBatch"][0][
        "options"
    ]
    assert options["changeStreamPreAndPostImages"] == {"enabled": True}
    # Disabled is the default, which is not kept (as mongod).
    db.command("collMod", "c", changeStreamPreAndPostImages={"enabled": False})
    options = db.command("listCollections", filter={"name": "c"})["cursor"]["firstBatch"][0][
        "options"
    ]
    assert "changeStreamPreAndPostImages" not in options
    with raises_code("TypeMismatch"):
        db.command("collMod", "c", changeStreamPreAndPostImages=True)
    with raises_code("TypeMismatch"):
        db.command("create", "d", changeStreamPreAndPostImages={"enabled": 1})
    with pytest.raises(OperationFailure) as failure:
        db.command("create", "d", changeStreamPreAndPostImages={})
    assert failure.value.code == 40414


def test_id_index_and_collation_options_are_checked(db):
    """`idIndex` can only be the `_id` index every collection gets; a collation is checked
    as every command's, and kept with its defaults filled in."""
    db.command("create", "c", idIndex={"key": {"_id": 1}, "name": "_id_", "v": 2})
    for spec, code in [
        ({"key": {"_id": -1}, "name": "_id_"}, 2),
        ({"key": {"_id": 1}}, 9),
        ({"key": {"_id": 1}, "name": "_id_", "unique": True}, 197),
        ({"key": {"_id": 1}, "name": "_id_", "v": 3}, 67),
        ({"key": {"_id": 1}, "name": "_id_", "collation": {"locale": "fr"}}, 2),
    ]:
        with pytest.raises(OperationFailure) as failure:
            db.command("create", "d", idIndex=spec)
        assert failure.value.code == code, spec
    with raises_code("TypeMismatch"):
        db.command("create", "d", collation="en")
    with pytest.raises(OperationFailure) as failure:
        db.command("create", "d", collation={"locale": "en", "strength": 6})
    assert failure.value.code == 2
    db.command("create", "e", collation={"locale": "fr"})
    options = db.command("listCollections", filter={"name": "e"})["cursor"]["firstBatch"][0][
        "options"
    ]
    assert options["collation"]["locale"] == "fr"
    assert options["collation"]["strength"] == 3


def test_coll_mod_refuses_options_of_other_kinds_of_collection(db):
    db.create_collection("c")
    with raises_code("InvalidOptions"):
        db.command("collMod", "c", timeseries={"granularity": "hours"})
    with raises_code("InvalidOptions"):
        db.command("collMod", "c", cappedSize=4096)
    with raises_code("InvalidOptions"):
        db.command("collMod", "c", expireAfterSeconds=60)


def test_coll_mod_of_a_missing_collection(db):
    with raises_code("NamespaceNotFound"):
        db.command("collMod", "missing", changeStreamPreAndPostImages={"enabled": True})


def test_unsupported_kinds_are_refused_not_faked(db):
    with pytest.raises(OperationFailure) as failure:
        db.command("create", "v", encryptedFields={"fields": []})
    assert failure.value.code == 115
    assert "v" not in db.list_collection_names()


def test_unknown_create_option(db):
    with pytest.raises(OperationFailure) as failure:
        db.command("create", "c", bogus=1)
    assert failure.value.code == 40415


def test_unique_index_built_on_existing_data_and_enforced(coll):
    coll.insert_many([{"_id": 1, "a": 1}, {"_id": 2, "a": 1}])
    with pytest.raises(OperationFailure) as failure:
        coll.create_index("a", unique=True)
    assert failure.value.code == 11000
    coll.delete_one({"_id": 2})
    assert coll.create_index("a", unique=True) == "a_1"
    with pytest.raises(DuplicateKeyError) as dup:
        coll.insert_one({"_id": 3, "a": 1.0})
    assert dup.value.details["keyPattern"] == {"a": 1}
    assert dup.value.details["keyValue"] == {"a": 1.0}
    coll.drop_index("a_1")
    coll.insert_one({"_id": 3, "a": 1})


def test_index_names_conflicts_and_drop_rules(coll):
    assert coll.create_index([("a", 1), ("b", -1)]) == "a_1_b_-1"
    assert sorted(i["name"] for i in coll.list_indexes()) == ["_id_", "a_1_b_-1"]
    with pytest.raises(OperationFailure) as conflict:
        coll.create_index([("a", 1), ("b", -1)], name="other")
    assert conflict.value.code == 85
    with pytest.raises(OperationFailure) as id_drop:
        coll.drop_index("_id_")
    assert id_drop.value.code == 72
    with pytest.raises(OperationFailure) as missing:
        coll.drop_index("nope")
    assert missing.value.code == 27
    coll.drop_indexes()
    assert [i["name"] for i in coll.list_indexes()] == ["_id_"]


@pytest.mark.parametrize(
    ("source", "target", "code"),
    [("missing", "dst", 26), ("src", "src", 20)],
)
def test_rename_collection_errors(client, db, source, target, code):
    db.src.insert_one({"_id": 1})
    with pytest.raises(OperationFailure) as refused:
        client.admin.command("renameCollection", f"{db.name}.{source}", to=f"{db.name}.{target}")
    assert refused.value.code == code
    assert db.src.count_documents({}) == 1


@pytest.mark.parametrize(
    ("spec", "code"),
    [
        (True, 5979703),
        ({"key": {"_id": 1}}, 40414),
        ({"key": "_id", "unique": True}, 14),
        ({"key": {"x": 1}, "unique": True}, 197),
        ({"key": {"_id": 1}, "unique": 0}, 5979700),
        ({"key": {"_id": 1}, "unique": True, "v": 1}, 5979704),
        ({"key": {"_id": 1}, "unique": True, "other": 1}, 40415),
    ],
)
def test_clustered_index_is_checked_as_mongod_8_checks_it(db, spec, code):
    with pytest.raises(OperationFailure) as refused:
        db.command("create", "c", clusteredIndex=spec)
    assert refused.value.code == code
    # A number key and a truthy unique are accepted; false is an ordinary collection.
    db.create_collection("d", clusteredIndex={"key": {"_id": 1.0}, "unique": 5})
    db.command("create", "e", clusteredIndex=False)
    assert (
        "clusteredIndex"
        not in db.command("listCollections", filter={"name": "e"})["cursor"]["firstBatch"][0][
            "options"
        ]
    )
    with pytest.raises(OperationFailure) as capped:
        db.create_collection(
            "f", clusteredIndex={"key": {"_id": 1}, "unique": True}, capped=True, size=4096
        )
    assert capped.value.code == 6049200


def test_rename_collection_by_uuid(client, db):
    db.src.insert_one({"_id": 1})
    db.dst.insert_one({"_id": 2})
    uuid_of = {
        c["name"]: c["info"]["uuid"] for c in db.command("listCollections")["cursor"]["firstBatch"]
    }
    source, target = f"{db.name}.src", f"{db.name}.dst"
    # collectionUUID must be the source's, dropTarget's UUID the target's.
    with pytest.raises(OperationFailure) as mismatch:
        client.admin.command(
            "renameCollection", source, to=target, dropTarget=True, collectionUUID=uuid_of["dst"]
        )
    assert mismatch.value.code == 361
    assert mismatch.value.details["actualCollection"] == "dst"
    with pytest.raises(OperationFailure) as mismatch:
        client.admin.command("renameCollection", source, to=target, dropTarget=uuid_of["src"])
    assert mismatch.value.code == 361
    client.admin.command(
        "renameCollection",
        source,
        to=target,
        dropTarget=uuid_of["dst"],
        collectionUUID=uuid_of["src"],
    )
    assert list(db.dst.find()) == [{"_id": 1}]


@pytest.mark.parametrize(
    ("target", "code"),
    [
        ("{db}.system.users", 20),
        ("{db}.a$b", 20),
        (".x", 73),
        ("{db_upper}.x", 13297),
    ],
)
def test_rename_collection_targets_checked_as_mongod(client, db, target, code):
    db.src.insert_one({"_id": 1})
    target = target.format(db=db.name, db_upper=db.name.upper())
    with pytest.raises(OperationFailure) as refused:
        client.admin.command("renameCollection", f"{db.name}.src", to=target)
    assert refused.value.code == code
    with pytest.raises(OperationFailure) as typed:
        client.admin.command("renameCollection", f"{db.name}.src", to=f"{db.name}.x", dropTarget=1)
    assert typed.value.code == 14
