"""Change streams on a replica set, through pymongo's `watch()`: MongoDB's event shapes
for inserts, updates, replacements and deletes, collection, database and deployment
streams, stages after `$changeStream`, `fullDocument: updateLookup`, invalidation,
resuming from a token (also on a new primary after the old one is killed), the events
of a transaction appearing at its commit, and the errors of what is not allowed.
"""

from __future__ import annotations

import time

import bson
import pytest
from pymongo import ReadPreference
from pymongo.errors import OperationFailure

from helpers import CODES, raises_code, reader_of, wait_until

CODES.update({"ChangeStreamFatalError": 280, "Location40573": 40573, "InvalidOptions": 72})


@pytest.fixture
def client(one_member_set):
    return one_member_set.client()


def next_events(stream, n: int, timeout_s: float = 10.0) -> list[dict]:
    events, deadline = [], time.monotonic() + timeout_s
    while len(events) < n and time.monotonic() < deadline:
        event = stream.try_next()
        if event is not None:
            events.append(event)
    assert len(events) == n, events
    return events


def test_document_changes_in_mongodbs_shapes(client):
    coll = client.shop.items
    coll.insert_one({"_id": 0})
    with coll.watch() as stream:
        coll.insert_one({"_id": 1, "a": 1, "arr": [1, 2, 3, 4], "sub": {"x": 1, "y": 1}})
        coll.update_one(
            {"_id": 1},
            {
                "$set": {"a": 2, "sub.y": 5},
                "$unset": {"sub.x": ""},
                "$push": {"arr": {"$each": [], "$slice": 2}},
            },
        )
        coll.replace_one({"_id": 1}, {"b": 1})
        coll.delete_one({"_id": 1})
        inserted, updated, replaced, deleted = next_events(stream, 4)
    ns = {"db": "shop", "coll": "items"}
    assert inserted["operationType"] == "insert" and inserted["ns"] == ns
    assert inserted["documentKey"] == {"_id": 1}
    assert inserted["fullDocument"]["arr"] == [1, 2, 3, 4]
    assert set(inserted) >= {"_id", "clusterTime", "wallTime"}
    assert updated["operationType"] == "update" and "fullDocument" not in updated
    assert updated["updateDescription"] == {
        "updatedFields": {"a": 2, "sub.y": 5},
        "removedFields": ["sub.x"],
        "truncatedArrays": [{"field": "arr", "newSize": 2}],
    }
    assert replaced["operationType"] == "replace"
    assert replaced["fullDocument"] == {"_id": 1, "b": 1}
    assert deleted["operationType"] == "delete" and deleted["documentKey"] == {"_id": 1}
    # Resume tokens are ordered as the events are.
    tokens = [e["_id"]["_data"] for e in (inserted, updated, replaced, deleted)]
    assert tokens == sorted(tokens)


def test_resume_after_a_token_and_update_lookup(client):
    coll = client.shop.items
    with coll.watch() as stream:
        coll.insert_many([{"_id": i} for i in range(5)])
        first_two = next_events(stream, 2)
        token = first_two[-1]["_id"]
    coll.update_one({"_id": 4}, {"$inc": {"n": 1}})
    with coll.watch(resume_after=token, full_document="updateLookup") as resumed:
        rest = next_events(resumed, 4)
    assert [e["documentKey"]["_id"] for e in rest] == [2, 3, 4, 4]
    assert rest[-1]["fullDocument"] == {"_id": 4, "n": 1}


def test_database_and_deployment_streams(client):
    with client.shop.watch() as database, client.watch() as deployment:
        client.shop.a.insert_one({"_id": 1})
        client.other.b.insert_one({"_id": 2})
        client.shop.a.drop()
        in_shop = next_events(database, 2)
        everywhere = next_events(deployment, 3)
    assert [(e["operationType"], e["ns"].get("coll")) for e in in_shop] == [
        ("insert", "a"),
        ("drop", "a"),
    ]
    assert [e["ns"]["db"] for e in everywhere] == ["shop", "other", "shop"]


def test_a_dropped_collection_invalidates_its_stream(client):
    coll = client.shop.items
    coll.insert_one({"_id": 0})
    stream = coll.watch()
    coll.insert_one({"_id": 1})
    coll.drop()
    events = next_events(stream, 3)
    assert [e["operationType"] for e in events] == ["insert", "drop", "invalidate"]
    assert not stream.alive


def test_stages_after_change_stream(client):
    coll = client.shop.items
    pipeline = [
        {"$match": {"operationType": "insert", "fullDocument.keep": True}},
        {"$project": {"fullDocument.keep": 0}},
    ]
    with coll.watch(pipeline) as stream:
        coll.insert_many([{"_id": 1, "keep": True, "v": 1}, {"_id": 2, "keep": False}])
        coll.update_one({"_id": 1}, {"$set": {"v": 2}})
        coll.insert_one({"_id": 3, "keep": True})
        events = next_events(stream, 2)
    assert [e["fullDocument"] for e in events] == [{"_id": 1, "v": 1}, {"_id": 3}]
    with coll.watch([{"$project": {"_id": 0}}]) as stream:
        coll.insert_one({"_id": 4})
        with raises_code("ChangeStreamFatalError") as info:
            next_events(stream, 1)
        assert info.value.has_error_label("NonResumableChangeStreamError")


def test_a_transaction_shows_at_its_commit(client):
    coll = client.shop.items
    coll.insert_one({"_id": 0})
    with coll.watch() as stream, client.start_session() as session:
        session.start_transaction()
        coll.insert_one({"_id": 1}, session=session)
        coll.update_one({"_id": 0}, {"$set": {"v": 1}}, session=session)
        assert stream.try_next() is None  # nothing before the commit
        session.commit_transaction()
        session.start_transaction()
        coll.insert_one({"_id": 2}, session=session)
        session.abort_transaction()
        coll.insert_one({"_id": 3})
        events = next_events(stream, 3)
    assert [(e["operationType"], e["documentKey"]["_id"]) for e in events] == [
        ("update", 0),
        ("insert", 1),
        ("insert", 3),
    ]
    assert events[0]["lsid"] == events[1]["lsid"] and "txnNumber" in events[0]
    assert "lsid" not in events[2]


def test_a_get_more_waits_for_changes(client):
    coll = client.shop.items
    with coll.watch(max_await_time_ms=300) as stream:
        started = time.monotonic()
        assert stream.try_next() is None
        assert time.monotonic() - started >= 0.25
        resume_token = stream.resume_token
        assert resume_token is not None  # a postBatchResumeToken without any event


def test_a_standalone_has_no_change_streams(start_server):
    client = start_server().client()
    with pytest.raises(OperationFailure) as info:
        client.shop.items.watch()
    assert info.value.code == 40573


def test_a_stream_resumes_on_a_new_primary(start_replica_set):
    rs = start_replica_set(members=3)
    client = rs.client(retryWrites=True, w="majority")
    coll = client.shop.items
    stream = coll.watch()
    coll.insert_many([{"_id": i} for i in range(300)])
    seen = [e["documentKey"]["_id"] for e in next_events(stream, 150)]
    token = stream.resume_token
    stream.close()
    rs.wait_for_primary().kill()
    rs.wait_for_primary()
    for i in range(300, 400):
        coll.insert_one({"_id": i})
    with coll.watch(resume_after=token) as resumed:
        seen += [e["documentKey"]["_id"] for e in next_events(resumed, 250, timeout_s=30)]
    # Every write once, in order, across the failover.
    assert seen == list(range(400))


def test_a_token_older_than_the_members_oplog_is_history_lost(one_member_set, basalt_binary):
    client = one_member_set.client()
    coll = client.shop.items
    with coll.watch() as stream:
        coll.insert_one({"_id": 1})
        token = next_events(stream, 1)[0]["_id"]
    for i in range(10, 20):
        coll.insert_one({"_id": i})
    second = one_member_set.add_member(basalt_binary)
    config = client.admin.command("replSetGetConfig")["config"]
    config["version"] += 1
    config["members"].append({"_id": 1, "host": f"127.0.0.1:{second.port}", "priority": 0})
    client.admin.command("replSetReconfig", config)
    coll.insert_one({"_id": 2})
    # The new member started from a copy of the data made after the token's entry and
    # those that followed it: it has not their records to resume from, and says so; from
    # a later point it serves.
    with reader_of(second) as reader:
        wait_until(lambda: reader.shop.items.count_documents({}) == 12, what="the copy")
        secondary = reader.shop.get_collection("items", read_preference=ReadPreference.SECONDARY)
        with pytest.raises(OperationFailure) as info:
            secondary.watch(resume_after=token)
        assert info.value.code == 286
        assert info.value.has_error_label("NonResumableChangeStreamError")
        with secondary.watch() as later:
            coll.insert_one({"_id": 3})
            assert next_events(later, 1)[0]["documentKey"] == {"_id": 3}


def test_malformed_change_streams_get_mongodbs_errors(client):
    coll = client.shop.items
    with raises_code("FailedToParse"):
        coll.watch(resume_after={"_data": "not a token"})
    with pytest.raises(OperationFailure) as info:
        coll.aggregate(
            [
                {
                    "$changeStream": {
                        "resumeAfter": {"_data": "0" * 24},
                        "startAtOperationTime": bson.Timestamp(1, 1),
                    }
                }
            ]
        )
    assert info.value.code == 40674
    with raises_code("BadValue"):
        coll.watch(full_document="sometimes")
    with raises_code("InvalidOptions"):
        client.shop.aggregate([{"$changeStream": {"allChangesForCluster": True}}])
    with raises_code("InvalidNamespace"):
        client.admin.watch()
    with pytest.raises(OperationFailure) as info:
        coll.aggregate([{"$changeStream": 1}])
    assert info.value.code == 6188500
    # Only stages that change or filter one event at a time may follow.
    with raises_code("IllegalOperation"):
        coll.aggregate([{"$changeStream": {}}, {"$group": {"_id": "$operationType"}}])
    for token, code in [("x", 14), ({"x": 1}, 40647), ({"_data": "zz"}, 9)]:
        with pytest.raises(OperationFailure) as info:
            coll.watch(resume_after=token)
        assert info.value.code == code
