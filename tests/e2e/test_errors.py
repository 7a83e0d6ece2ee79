"""Error replies: the codes and behaviours drivers and applications branch on.

An unknown command, a bad filter or an oversized document must come back as the
MongoDB error with the same `code`/`codeName`, as ok:0 (or a write error), never as
a dropped connection; and some things that look like errors are not (finding in or
dropping a missing collection).
"""

from __future__ import annotations

import bson
import pytest
from pymongo.errors import OperationFailure

from helpers import CODES, raises_code

MAX_BSON_BYTES = 16 * 1024 * 1024


def test_unknown_command(db):
    with raises_code("CommandNotFound") as info:
        db.command("frobnicateTheDatabase")
    assert "frobnicateTheDatabase" in info.value.details["errmsg"]


def test_find_on_missing_collection_is_empty(db):
    reply = db.command("find", "missing")
    assert reply["cursor"]["firstBatch"] == []
    assert reply["cursor"]["id"] == 0
    assert "missing" not in db.list_collection_names()


def test_drop_of_missing_collection_succeeds(db):
    """Since MongoDB 7.0 (SERVER-43894) dropping a missing collection is a no-op, not error 26."""
    assert db.command("drop", "missing")["ok"] == 1


BAD_FILTERS = {
    "unknown operator": {"a": {"$frobnicate": 1}},
    "unknown top-level operator": {"$frobnicate": [{"a": 1}]},
    "$in needs an array": {"a": {"$in": 1}},
    "$and needs an array": {"$and": {"a": 1}},
    "$or needs a non-empty array": {"$or": []},
    "$size needs a number": {"a": {"$size": "x"}},
}


@pytest.mark.parametrize("filter_", BAD_FILTERS.values(), ids=BAD_FILTERS.keys())
@pytest.mark.parametrize("operation", ["find", "count", "delete", "update"])
def test_bad_filter_is_bad_value(coll, filter_, operation):
    coll.insert_one({"_id": 1, "a": 1})
    run = {
        "find": lambda: list(coll.find(filter_)),
        "count": lambda: coll.count_documents(filter_),
        "delete": lambda: coll.delete_many(filter_),
        "update": lambda: coll.update_many(filter_, {"$set": {"b": 1}}),
    }[operation]
    with raises_code("BadValue"):
        run()
    assert coll.find_one() == {"_id": 1, "a": 1}


def test_filter_of_wrong_type(db):
    with raises_code("TypeMismatch"):
        db.command("find", "c", filter=1)


def test_invalid_collection_name(db):
    with raises_code("InvalidNamespace"):
        db.command("insert", "", documents=[{"_id": 1}])
    # Refused by the catalog as the insert stores its batch: still the command's error,
    # not each document's.
    with raises_code("InvalidNamespace"):
        db.command("insert", "a$b", documents=[{"_id": 1}, {"_id": 2}])


def _doc_of_size(size: int) -> dict:
    doc = {"_id": 1, "s": ""}
    doc["s"] = "x" * (size - len(bson.encode(doc)))
    assert len(bson.encode(doc)) == size
    return doc


@pytest.mark.slow
def test_document_of_exactly_16_mib_is_accepted(coll):
    doc = _doc_of_size(MAX_BSON_BYTES)
    coll.insert_one(doc)
    assert coll.find_one({}, {"s": 0}) == {"_id": 1}
    assert len(coll.find_one()["s"]) == len(doc["s"])


@pytest.mark.slow
def test_document_over_16_mib_is_refused(db):
    """pymongo refuses such a document itself, so send the insert command raw.

    MongoDB answers ok:1 with a write error (code 2, "object to insert too large");
    refusing the whole command with BSONObjectTooLarge (10334) is accepted too.
    """
    reply = db.command("insert", "c", documents=[_doc_of_size(MAX_BSON_BYTES + 1)], check=False)
    if reply["ok"] == 1:
        assert reply["n"] == 0
        (error,) = reply["writeErrors"]
        assert error["index"] == 0
        assert error["code"] in (CODES["BadValue"], CODES["BSONObjectTooLarge"])
    else:
        assert reply["code"] == CODES["BSONObjectTooLarge"], reply
    assert db["c"].count_documents({}) == 0


def test_find_options_unknown_unsupported_and_tailable(db, coll):
    """find refuses a field it does not know (40415, as mongod's parser does) rather than
    ignoring it, refuses the options Basalt has not built rather than answering as if
    they were absent, and refuses a tailable cursor as mongod does on a collection that
    is not capped (Basalt has no capped collections yet)."""
    coll.insert_one({"a": 1})
    with pytest.raises(OperationFailure) as info:
        db.command("find", "c", bogus=1)
    assert info.value.code == 40415
    assert "find.bogus" in str(info.value)
    with pytest.raises(OperationFailure) as info:
        db.command("explain", {"find": "c", "bogus": 1})
    assert info.value.code == 40415
    for option, value in [("returnKey", True), ("showRecordId", True)]:
        with pytest.raises(OperationFailure) as info:
            db.command("find", "c", **{option: value})
        assert info.value.code == 115, option
    # min and max are built: they need a hint, as in mongod.
    with pytest.raises(OperationFailure) as info:
        db.command("find", "c", max={"a": 5})
    assert info.value.code == 51173
    with raises_code("BadValue"):
        db.command("find", "c", tailable=True)
    with raises_code("FailedToParse"):
        db.command("find", "c", awaitData=True)
    # Options asked off, and those that mean nothing on one server, are accepted.
    reply = db.command(
        "find",
        "c",
        returnKey=False,
        showRecordId=False,
        tailable=False,
        noCursorTimeout=True,
        allowPartialResults=True,
        readConcern={"level": "local"},
        comment="why",
    )
    assert len(reply["cursor"]["firstBatch"]) == 1
    assert list(coll.find({}, {"_id": 0}).comment("c").max_time_ms(1000)) == [{"a": 1}]


@pytest.mark.parametrize(
    ("value", "code"),
    [(-1, "BadValue"), (2**31, "BadValue"), (1.5, "FailedToParse"), ("100", "TypeMismatch")],
)
def test_max_time_ms_must_be_a_whole_int32(db, value, code):
    # MongoDB 8's codes: out of range BadValue, fractional FailedToParse, not a number
    # TypeMismatch, for every command.
    with raises_code(code):
        db.command("find", "c", maxTimeMS=value)
    with raises_code(code):
        db.command("count", "c", maxTimeMS=value)
    with raises_code(code):
        db.command("ping", maxTimeMS=value)


@pytest.mark.parametrize(
    ("concern", "code"),
    [
        ({"level": "LOCAL"}, 2),
        ({"level": 1}, 14),
        ({"level": "local", "x": 1}, 40415),
        ({"provenance": "nobody"}, 2),
        ({"provenance": "clientSupplied", "level": "majority"}, None),
        ({"atClusterTime": bson.Timestamp(1, 1)}, 72),
        ({"afterClusterTime": 5}, 14),
        ({"afterClusterTime": None}, 14),
        ({"atClusterTime": None}, 14),
        ({"afterClusterTime": bson.Timestamp(1, 1)}, 20),
        ({"level": "linearizable"}, 123),
        ({"level": "snapshot"}, 123),
        ({"level": "available"}, None),
    ],
)
def test_read_concerns_are_parsed_as_mongod_on_a_standalone(db, concern, code):
    if code is None:
        assert db.command("distinct", "c", key="x", readConcern=concern)["ok"] == 1
        return
    with pytest.raises(OperationFailure) as info:
        db.command("distinct", "c", key="x", readConcern=concern)
    assert info.value.code == code


@pytest.mark.parametrize(
    ("concern", "code"),
    [
        ({"w": 51}, 9),
        ({"w": -1}, 9),
        ({"w": float("nan")}, 9),
        ({"w": {}}, 9),
        ({"w": {"dc": "x"}}, 9),
        ({"w": [1]}, 9),
        ({"w": None}, 2),
        ({"w": "Majority"}, 2),
        ({"w": 1, "j": "yes"}, 14),
        ({"w": 1, "wtimeout": 2**31}, 9),
        ({"w": 1, "x": 1}, 40415),
        ({"w": 1, "provenance": "me"}, 2),
        ({"w": 2}, 2),
        ({"w": bson.Decimal128("1.5")}, 2),
        ({"w": 1.5}, None),
        ({"w": -0.99}, None),
        ({"w": bson.Decimal128("1.4")}, None),
        ({"w": {"dc": 1}}, None),
        ({"w": {"dc": float("-inf")}}, None),
        ({"w": "majority", "wtimeout": "soon", "j": 1}, None),
        ({"w": 1, "wtimeout": float("nan")}, None),
    ],
)
def test_write_concerns_are_parsed_as_mongod_on_a_standalone(db, concern, code):
    if code is None:
        assert db.command("insert", "c", documents=[{}], writeConcern=concern)["n"] == 1
        return
    with pytest.raises(OperationFailure) as info:
        db.command("insert", "c", documents=[{}], writeConcern=concern)
    assert info.value.code == code
    assert db.c.count_documents({}) == 0


@pytest.mark.parametrize(
    ("command", "code"),
    [
        ({"insert": "c", "documents": [{}], "ordered": 1}, 14),
        ({"insert": "c", "documents": [{}], "bogus": 1}, 40415),
        ({"update": "c", "updates": [{"q": {}, "u": {}}], "Ordered": True}, 40415),
        ({"delete": "c", "deletes": [{"q": {}, "limit": 0}], "let": 1}, 14),
        ({"findAndModify": "c", "query": {}, "remove": True, "hint": 1}, 9),
        ({"findAndModify": "c", "query": {}, "remove": "yes"}, 14),
        ({"count": "c", "Query": {}}, 40415),
        ({"count": "c", "hint": 1}, 9),
        ({"drop": "c", "bogus": 1}, 40415),
        ({"dropIndexes": "c", "index": "*", "bogus": 1}, 40415),
        ({"dropIndexes": "c", "index": 1}, 14),
        ({"dropIndexes": "c"}, 40414),
        ({"killCursors": "c", "cursors": [], "bogus": 1}, 40415),
        ({"connectionStatus": 1, "showPrivileges": "yes"}, 14),
        ({"dbStats": 1, "freeStorage": "yes"}, 14),
        ({"aggregate": "c", "pipeline": [], "cursor": {}, "explain": 1}, 14),
        ({"aggregate": "c", "pipeline": [], "cursor": {"BatchSize": 1}}, 40415),
        ({"aggregate": "c", "pipeline": [], "cursor": {}, "$bogus": 1}, 40415),
        ({"find": "c", "$bogus": 1}, 40415),
        # An explained command's arguments are checked as when it runs.
        ({"explain": {"count": "c", "Query": {}}}, 40415),
        ({"explain": {"delete": "c", "deletes": [{"q": {}, "limit": 0}], "ordered": 1}}, 14),
        # Every command is declared: an IDL one refuses what it does not know ...
        ({"ping": 1, "bogus": 1}, 40415),
        ({"collStats": "c", "bogus": 1}, 40415),
        ({"usersInfo": 1, "bogus": 1}, 40415),
        ({"dropDatabase": 1, "bogus": 1}, 40415),
        ({"getMore": bson.Int64(1), "collection": "c", "bogus": 1}, 40415),
        ({"createIndexes": "c", "indexes": [{"key": {"a": 1}, "name": "a_1"}], "x": 1}, 40415),
        ({"create": "d", "encryptedFields": "x"}, 14),
        ({"hello": 1, "loadBalanced": 1}, 14),
        (
            {
                "mapReduce": "c",
                "map": "function() {}",
                "reduce": "function(k, v) { return 1; }",
                "out": {"inline": 1},
                "verbose": 1,
            },
            14,
        ),
        # The sessions a session command names are strict {id: <UUID>, ...}.
        ({"killSessions": [{}]}, 40414),
        ({"killSessions": [{"id": bson.Binary(b"\0" * 8, 4)}]}, 207),
        ({"endSessions": [{"id": bson.Binary(b"\0" * 16, 4), "x": 1}]}, 40415),
        ({"refreshSessions": [{"id": bson.Binary(b"\0" * 16, 3)}]}, 14),
        # ... and one mongod reads by hand ignores it.
        ({"hello": 1, "bogus": 1}, None),
        ({"serverStatus": 1, "bogus": 1}, None),
        ({"validate": "c", "bogus": 1}, None),
        ({"dbHash": 1, "bogus": 1}, None),
        # Kept, as mongod keeps them: numbers for safe booleans, count's legacy fields.
        ({"insert": "c", "documents": [{}], "bypassDocumentValidation": 1}, None),
        ({"count": "c", "fields": 5}, None),
        ({"connectionStatus": 1, "showPrivileges": 0}, None),
        ({"findAndModify": "c", "query": {"x": 1}, "remove": 1, "hint": "_id_"}, None),
        ({"aggregate": "c", "pipeline": [], "cursor": {}, "$readPreference": {}}, None),
    ],
)
def test_command_arguments_are_declared_and_typed_as_mongod(db, command, code):
    """Arguments checked in one place (commands/arguments.rs) before a command runs: an
    unknown field (case matters) is 40415, a field of the wrong type TypeMismatch, and
    nothing is written when either is refused."""
    db.c.insert_one({"_id": "kept"})
    if code is None:
        assert db.command(command)["ok"] == 1
    else:
        with pytest.raises(OperationFailure) as info:
            db.command(command)
        assert info.value.code == code, info.value.details
        assert [d["_id"] for d in db.c.find()] == ["kept"]


def test_get_more_batch_size_is_a_safe_int64(db):
    """getMore's batchSize is read as mongod reads a safe int64: a fraction is cut (0.5
    is no limit, as 0 is), NaN is 0, and only a negative one is refused."""
    db.c.insert_many([{"i": i} for i in range(5)])
    for batch_size, returned in [
        (0.5, 4),
        (2.9, 2),
        (float("nan"), 4),
        (bson.Decimal128("1.5"), 2),
    ]:
        first = db.command("find", "c", batchSize=1)["cursor"]
        reply = db.command("getMore", first["id"], collection="c", batchSize=batch_size)
        assert len(reply["cursor"]["nextBatch"]) == returned, batch_size
    first = db.command("find", "c", batchSize=1)["cursor"]
    with pytest.raises(OperationFailure) as info:
        db.command("getMore", first["id"], collection="c", batchSize=-1.5)
    assert info.value.code == 2


def test_options_parsed_as_strict_structs(client, db):
    """getParameter's options document and $listLocalSessions' spec are mongod's strict
    structs: an unknown field is 40415, a wrong type 14, a missing user 40414; null is
    as if not given."""
    cases = [
        ({"getParameter": {"allParameters": 1, "bogus": 1}}, 40415),
        ({"getParameter": {"allParameters": True, "setAt": 1.5}}, 14),
    ]
    for command, code in cases:
        with pytest.raises(OperationFailure) as info:
            client.admin.command(command)
        assert info.value.code == code, command
    assert "logLevel" in client.admin.command({"getParameter": {"allParameters": 1}})

    def list_sessions(spec):
        return db.client.admin.command(
            {"aggregate": 1, "pipeline": [{"$listLocalSessions": spec}], "cursor": {}}
        )

    for spec in [{"users": None, "allUsers": None}, {"users": [None], "allUsers": True}]:
        assert list_sessions(spec)["ok"] == 1, spec
    for spec, code in [
        ({"users": [{"user": "a", "db": None}]}, 40414),
        ({"users": [{"user": "a", "db": "b", "x": 1}]}, 40415),
        ({"users": [{"user": "a", "db": "b"}], "allUsers": True}, 12),
    ]:
        with pytest.raises(OperationFailure) as info:
            list_sessions(spec)
        assert info.value.code == code, spec


def test_bulk_write_needs_its_operations_and_namespaces(client):
    """bulkWrite's ops and nsInfo are required (40414), as mongod's parser has it; null
    counts as missing too (the unit tests of commands/arguments.rs send it: pymongo
    cannot)."""
    for missing in ["ops", "nsInfo"]:
        command = {"bulkWrite": 1, "ops": [], "nsInfo": [{"ns": "db.c"}]}
        del command[missing]
        with pytest.raises(OperationFailure) as info:
            client.admin.command(command)
        assert info.value.code == 40414, missing


@pytest.mark.parametrize(
    ("command", "write_concern"),
    [
        ({"killCursors": "c", "cursors": []}, False),
        ({"startSession": 1}, False),
        ({"killAllSessions": []}, False),
        ({"listDatabases": 1}, False),
        ({"renameCollection": "{db}.c", "to": "{db}.d"}, True),
    ],
)
def test_commands_that_read_only_at_local(client, db, command, write_concern):
    """mongod's maintenance commands read only at `local`: another level is
    InvalidOptions (72), a misspelt one BadValue; those that take no write concern refuse
    one (72), and renameCollection takes one."""
    db.c.insert_one({})
    command = {k: v.format(db=db.name) if isinstance(v, str) else v for k, v in command.items()}
    on_admin = {"renameCollection", "killAllSessions", "listDatabases"}
    target = client.admin if on_admin & set(command) else db
    for level, code in [("majority", 72), ("snapshot", 72), ("available", 72), ("bogus", 2)]:
        with pytest.raises(OperationFailure) as info:
            target.command({**command, "readConcern": {"level": level}})
        assert info.value.code == code, level
    with_concern = {**command, "writeConcern": {"w": 1}}
    if write_concern:
        assert target.command(with_concern)["ok"] == 1
    else:
        with pytest.raises(OperationFailure) as info:
            target.command(with_concern)
        assert info.value.code == 72
        assert target.command({**command, "readConcern": {"level": "local"}})["ok"] == 1


def test_explain_verbosity_is_a_string_or_null(db):
    inner = {"find": "c", "filter": {}}
    assert db.command("explain", inner, verbosity=None)["ok"] == 1
    with raises_code("TypeMismatch"):
        db.command("explain", inner, verbosity=1)
    with raises_code("BadValue"):
        db.command("explain", inner, verbosity="everything")


@pytest.mark.parametrize("field", ["readConcern", "writeConcern"])
def test_read_and_write_concerns_are_documents(db, field):
    with raises_code("TypeMismatch"):
        db.command("find", "c", **{field: "majority"})
    with raises_code("TypeMismatch"):
        db.command("ping", **{field: 1})


def test_max_time_ms_zero_and_int32_max_mean_what_they_say(db):
    assert db.command("find", "c", maxTimeMS=0)["ok"] == 1.0
    assert db.command("find", "c", maxTimeMS=2**31 - 1)["ok"] == 1.0


def test_atlas_search_index_commands_are_refused_as_mongod_does(db):
    """mongod without a search engine answers the Atlas Search index helpers with
    SearchNotEnabled (31082), whose message names Atlas: drivers' tests look for it."""
    collection = db.search_refused
    collection.insert_one({"_id": 1})
    attempts = [
        lambda: collection.create_search_index({"definition": {"mappings": {"dynamic": True}}}),
        lambda: collection.update_search_index("default", {"mappings": {"dynamic": True}}),
        lambda: collection.drop_search_index("default"),
        lambda: list(collection.list_search_indexes()),
    ]
    for attempt in attempts:
        with pytest.raises(OperationFailure) as refused:
            attempt()
        assert refused.value.code == 31082
        assert refused.value.details["codeName"] == "SearchNotEnabled"
        assert "Atlas" in str(refused.value)


def test_a_writing_pipeline_cannot_read_linearizable(db):
    db.lin_source.insert_many([{"_id": 1}, {"_id": 2}])
    for stage in ({"$out": "lin_target"}, {"$merge": {"into": "lin_target"}}):
        with pytest.raises(OperationFailure) as refused:
            db.command(
                "aggregate",
                "lin_source",
                pipeline=[{"$match": {}}, stage],
                cursor={},
                readConcern={"level": "linearizable"},
            )
        assert refused.value.code == 72, stage  # InvalidOptions
    assert "lin_target" not in db.list_collection_names()
