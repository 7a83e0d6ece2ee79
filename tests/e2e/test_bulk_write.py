"""MongoDB 8.0's `bulkWrite` command: inserts, updates and deletes across collections
in one command on `admin`, per-operation results in a cursor, MongoDB's totals and
errors, ordered and unordered, `errorsOnly`; on a replica set through the log.
"""

from __future__ import annotations

import pytest
from pymongo import DeleteOne, InsertOne, UpdateOne
from pymongo.errors import OperationFailure

from helpers import raises_code


def bulk(client, ops, namespaces, **options):
    command = {"bulkWrite": 1, "ops": ops, "nsInfo": [{"ns": ns} for ns in namespaces]}
    return client.admin.command({**command, **options})


def test_operations_across_collections_with_their_results(client, db):
    db.a.insert_one({"_id": 1, "x": 1})
    a, b = f"{db.name}.a", f"{db.name}.b"
    reply = bulk(
        client,
        [
            {"insert": 0, "document": {"_id": 2}},
            {"insert": 1, "document": {"_id": 1}},
            {"update": 0, "filter": {"_id": 1}, "updateMods": {"$set": {"x": 5}}},
            {"update": 0, "filter": {"_id": 9}, "updateMods": {"$set": {"x": 9}}, "upsert": True},
            {"insert": 0, "document": {"_id": 2}},
            {"update": 0, "filter": {}, "updateMods": [{"$set": {"y": 1}}], "multi": True},
            {"delete": 0, "filter": {"_id": 2}},
            {"delete": 1, "filter": {}, "multi": True},
        ],
        [a, b],
        ordered=False,
    )
    assert reply["cursor"]["ns"] == "admin.$cmd.bulkWrite"
    assert reply["cursor"]["id"] == 0
    results = reply["cursor"]["firstBatch"]
    assert [r["idx"] for r in results] == list(range(8))
    assert results[3]["upserted"] == {"_id": 9}
    assert (results[4]["ok"], results[4]["code"]) == (0, 11000)
    assert results[5] == {"ok": 1.0, "idx": 5, "n": 3, "nModified": 3}
    totals = {k: reply[k] for k in reply if k.startswith("n")}
    assert totals == {
        "nErrors": 1,
        "nInserted": 2,
        "nMatched": 4,
        "nModified": 4,
        "nUpserted": 1,
        "nDeleted": 2,
    }
    assert sorted(db.a.find(), key=lambda d: d["_id"]) == [
        {"_id": 1, "x": 5, "y": 1},
        {"_id": 9, "x": 9, "y": 1},
    ]
    assert db.b.count_documents({}) == 0


def test_ordered_stops_at_the_first_error_and_errors_only_shows_errors(client, db):
    ns = f"{db.name}.c"
    ops = [
        {"insert": 0, "document": {"_id": 1}},
        {"insert": 0, "document": {"_id": 1}},
        {"insert": 0, "document": {"_id": 2}},
    ]
    reply = bulk(client, ops, [ns])
    assert (reply["nInserted"], reply["nErrors"]) == (1, 1)
    assert [r["idx"] for r in reply["cursor"]["firstBatch"]] == [0, 1]
    db.c.drop()
    reply = bulk(client, ops, [ns], ordered=False, errorsOnly=True)
    assert (reply["nInserted"], reply["nErrors"]) == (2, 1)
    assert [r["idx"] for r in reply["cursor"]["firstBatch"]] == [1]


@pytest.mark.parametrize(
    ("command", "code"),
    [
        ({"ops": [], "nsInfo": [{"ns": "t.c"}]}, "InvalidLength"),
        ({"ops": [{"insert": 3, "document": {}}], "nsInfo": [{"ns": "t.c"}]}, "BadValue"),
        ({"ops": [{"insert": 0, "document": 1}], "nsInfo": [{"ns": "t.c"}]}, "TypeMismatch"),
        (
            {"ops": [{"update": 0, "filter": {}, "updateMods": 1}], "nsInfo": [{"ns": "t.c"}]},
            "FailedToParse",
        ),
        ({"ops": [{"insert": 0, "document": {}}], "nsInfo": [{"ns": "nodot"}]}, "InvalidNamespace"),
        (
            {"ops": [{"insert": 0, "document": {}}], "nsInfo": [{"ns": "t.c"}], "ordered": 1},
            "TypeMismatch",
        ),
    ],
)
def test_malformed_commands_get_mongodbs_errors(client, command, code):
    with raises_code(code):
        client.admin.command({"bulkWrite": 1, **command})


def test_missing_and_unknown_fields(client):
    for command, code in [
        ({"bulkWrite": 1, "nsInfo": [{"ns": "t.c"}]}, 40414),
        ({"bulkWrite": 1, "ops": [{"insert": 0}], "nsInfo": [{"ns": "t.c"}]}, 40414),
        (
            {
                "bulkWrite": 1,
                "ops": [{"insert": 0, "document": {}}],
                "nsInfo": [{"ns": "t.c"}],
                "x": 1,
            },
            40415,
        ),
        ({"bulkWrite": 1, "ops": [{"replace": 0}], "nsInfo": [{"ns": "t.c"}]}, 40415),
    ]:
        with pytest.raises(OperationFailure) as info:
            client.admin.command(command)
        assert info.value.code == code
    with raises_code("Unauthorized"):
        client.t.command(
            {"bulkWrite": 1, "ops": [{"insert": 0, "document": {}}], "nsInfo": [{"ns": "t.c"}]}
        )
    assert client.t.c.count_documents({}) == 0


def test_through_a_replica_set(one_member_set):
    client = one_member_set.client()
    reply = bulk(client, [{"insert": 0, "document": {"_id": i}} for i in range(5)], ["rs.c"])
    assert reply["nInserted"] == 5
    assert client.rs.c.count_documents({}) == 5


def test_a_retried_bulk_write_runs_once(start_replica_set):
    """pymongo's client.bulk_write (wire version 25) as a retryable write: the first
    attempt runs and then fails with a retryable write concern error; the driver's retry
    is answered from the session table, so nothing runs twice."""
    test_commands = ["--setParameter", "enableTestCommands=1"]
    client = start_replica_set(members=1, extra_args=test_commands).client()
    client.rs.c.insert_one({"_id": "counter", "n": 0})
    client.admin.command(
        "configureFailPoint",
        "failCommand",
        mode={"times": 1},
        data={
            "failCommands": ["bulkWrite"],
            "writeConcernError": {"code": 91, "errmsg": "Replication is being shut down"},
        },
    )
    result = client.bulk_write(
        [
            InsertOne({"_id": 1}, namespace="rs.c"),
            UpdateOne({"_id": "counter"}, {"$inc": {"n": 1}}, namespace="rs.c"),
            InsertOne({"_id": 2}, namespace="rs.other"),
        ]
    )
    assert (result.inserted_count, result.modified_count) == (2, 1)
    assert client.rs.c.find_one({"_id": "counter"})["n"] == 1
    assert client.rs.c.count_documents({}) == 2
    assert client.rs.other.count_documents({}) == 1


def test_in_a_transaction(one_member_set):
    client = one_member_set.client()
    client.rs.c.insert_one({"_id": 0})
    with client.start_session() as session, session.start_transaction():
        client.bulk_write(
            [InsertOne({"_id": 1}, namespace="rs.c"), DeleteOne({"_id": 0}, namespace="rs.c")],
            session=session,
        )
        # Not visible outside the transaction before it commits.
        assert client.rs.c.count_documents({}) == 1
        assert client.rs.c.find_one({}) == {"_id": 0}
    assert list(client.rs.c.find()) == [{"_id": 1}]
    with client.start_session() as session:
        session.start_transaction()
        client.bulk_write([InsertOne({"_id": 2}, namespace="rs.c")], session=session)
        session.abort_transaction()
    assert list(client.rs.c.find()) == [{"_id": 1}]
