"""The connection handshake: hello / legacy isMaster replies and wire compression.

Every driver starts with this exchange and decides from it what the server is
(standalone, which wire versions, which size limits) and whether to compress. A wrong
field here breaks every client before the first query, so each field is pinned to
what a MongoDB 8.0 standalone answers.
"""

from __future__ import annotations

import datetime
import struct
import time

import pytest
from bson import ObjectId

import wire

COMPRESSORS = ["snappy", "zlib", "zstd"]

LIMITS = {
    "maxBsonObjectSize": 16 * 1024 * 1024,
    "maxMessageSizeBytes": 48_000_000,
    "maxWriteBatchSize": 100_000,
    "maxWireVersion": 25,
    "minWireVersion": 0,
    "logicalSessionTimeoutMinutes": 30,
}


@pytest.mark.parametrize(
    "command, primary_field, absent_field",
    [
        ("hello", "isWritablePrimary", "ismaster"),
        ("isMaster", "ismaster", "isWritablePrimary"),
        ("ismaster", "ismaster", "isWritablePrimary"),
    ],
)
def test_hello_reply_fields(client, command, primary_field, absent_field):
    reply = client.admin.command(command)
    assert reply["ok"] == 1
    assert reply[primary_field] is True
    assert absent_field not in reply
    for field, value in LIMITS.items():
        assert reply[field] == value, field
    assert isinstance(reply["connectionId"], int) and reply["connectionId"] > 0
    assert isinstance(reply["localTime"], datetime.datetime)
    assert reply["readOnly"] is False
    # A standalone: no replica set name, and not a mongos ("isdbgrid").
    assert "setName" not in reply
    assert "msg" not in reply


def test_pymongo_sees_a_standalone(client):
    client.admin.command("ping")
    description = client.topology_description
    assert description.topology_type_name == "Single"
    (server_description,) = description.server_descriptions().values()
    assert server_description.server_type_name == "Standalone"
    assert server_description.max_wire_version == 25


def test_connection_ids_are_distinct(server):
    ids = set()
    for _ in range(3):
        with wire.RawConnection(server.port) as conn:
            ids.add(conn.command({"hello": 1, "$db": "admin"}).doc["connectionId"])
    assert len(ids) == 3


def test_awaitable_hello_waits_while_the_topology_is_unchanged(server):
    """A driver's monitor sends the topologyVersion it knows and maxAwaitTimeMS: mongod
    answers when the topology changes or the time is up. Answering at once makes every
    monitor ask again in a tight loop."""
    with wire.RawConnection(server.port) as conn:
        version = conn.command({"hello": 1, "$db": "admin"}).doc["topologyVersion"]
        started = time.monotonic()
        reply = conn.command(
            {"hello": 1, "topologyVersion": version, "maxAwaitTimeMS": 300, "$db": "admin"}
        ).doc
        assert time.monotonic() - started >= 0.3
        assert reply["topologyVersion"] == version
        other = {"processId": ObjectId(), "counter": 0}
        started = time.monotonic()
        conn.command({"hello": 1, "topologyVersion": other, "maxAwaitTimeMS": 5000, "$db": "admin"})
        assert time.monotonic() - started < 2, "another process's version is answered at once"


def test_awaitable_hello_with_exhaust_allowed_streams_replies(server):
    """Streaming monitors (the Node, Java, Go drivers) send an awaitable hello with the
    exhaustAllowed flag: mongod answers with moreToCome and then sends the next hello
    reply on its own, answering its last one, for as long as the client listens."""
    exhaust_allowed, more_to_come = 1 << 16, 1 << 1
    with wire.RawConnection(server.port) as conn:
        version = conn.command({"hello": 1, "$db": "admin"}).doc["topologyVersion"]
        request = {"hello": 1, "topologyVersion": version, "maxAwaitTimeMS": 200, "$db": "admin"}
        message = wire.op_msg(request, flags=exhaust_allowed)
        answering = wire.HEADER.unpack_from(message)[1]
        conn.send(message)
        started = time.monotonic()
        for _ in range(3):
            header = conn._read_exact(wire.HEADER.size)
            length, request_id, response_to, _opcode = wire.HEADER.unpack(header)
            payload = conn._read_exact(length - wire.HEADER.size)
            assert struct.unpack_from("<I", payload)[0] & more_to_come, "more are to come"
            assert response_to == answering, "each reply answers the one before"
            answering = request_id
        # Each waits for news or maxAwaitTimeMS, as a plain awaitable hello does.
        assert time.monotonic() - started >= 0.6
    # Without the flag the same hello gets one plain reply.
    with wire.RawConnection(server.port) as conn:
        assert conn.command(request).doc["ok"] == 1.0


def test_legacy_op_query_is_master_gets_op_reply(server):
    """Drivers open with OP_QUERY isMaster on admin.$cmd; the answer must be OP_REPLY."""
    with wire.RawConnection(server.port) as conn:
        conn.send(wire.op_query("admin.$cmd", {"isMaster": 1, "helloOk": True}))
        reply = conn.read_reply()
    assert reply.inner_opcode == wire.OP_REPLY
    assert reply.doc["ok"] == 1
    assert reply.doc["ismaster"] is True
    assert reply.doc["helloOk"] is True
    assert reply.doc["maxWireVersion"] == 25


@pytest.mark.parametrize(
    "offered, expected",
    [
        (["snappy"], {"snappy"}),
        (["zlib"], {"zlib"}),
        (["zstd"], {"zstd"}),
        (["zstd", "snappy", "zlib"], {"zstd", "snappy", "zlib"}),
        (["lz4-not-a-mongodb-compressor"], set()),
    ],
)
def test_hello_negotiates_the_intersection_of_compressors(server, offered, expected):
    with wire.RawConnection(server.port) as conn:
        reply = conn.command({"hello": 1, "compression": offered, "$db": "admin"})
    assert set(reply.doc.get("compression", [])) == expected


@pytest.mark.parametrize("compressor", COMPRESSORS)
def test_compressed_requests_over_the_wire(server, compressor):
    """After negotiation the server must accept OP_COMPRESSED requests and answer them."""
    ns_db = f"wire_{compressor}"
    with wire.RawConnection(server.port) as conn:
        conn.command({"hello": 1, "compression": [compressor], "$db": "admin"})
        docs = [{"_id": i, "text": "basalt " * 50} for i in range(20)]
        insert = conn.command(
            {"insert": "c", "documents": docs, "$db": ns_db}, compressor=compressor
        )
        found = conn.command({"find": "c", "sort": {"_id": 1}, "$db": ns_db}, compressor=compressor)
        conn.command({"dropDatabase": 1, "$db": ns_db}, compressor=compressor)
    # A server MAY answer uncompressed; if it compresses, it uses the negotiated one.
    for reply in (insert, found):
        assert reply.compressor_id in (None, wire.COMPRESSOR_IDS[compressor])
        assert reply.inner_opcode == wire.OP_MSG
    assert insert.doc["ok"] == 1 and insert.doc["n"] == 20
    assert found.doc["cursor"]["firstBatch"] == docs


@pytest.mark.parametrize("compressor", COMPRESSORS)
def test_driver_crud_with_compression(server, compressor):
    client = server.client(compressors=compressor)
    coll = client[f"driver_{compressor}"]["c"]
    try:
        coll.insert_many([{"_id": i, "group": i % 4, "text": "x" * 200} for i in range(500)])
        assert coll.count_documents({"group": 1}) == 125
        assert [d["_id"] for d in coll.find({"_id": {"$lt": 5}}).sort("_id", -1)] == [4, 3, 2, 1, 0]
        assert coll.update_many({"group": 2}, {"$set": {"seen": True}}).modified_count == 125
        assert coll.delete_many({"group": 3}).deleted_count == 125
        totals = list(
            coll.aggregate([{"$group": {"_id": "$group", "n": {"$sum": 1}}}, {"$sort": {"_id": 1}}])
        )
        assert totals == [{"_id": 0, "n": 125}, {"_id": 1, "n": 125}, {"_id": 2, "n": 125}]
        assert len(list(coll.find().batch_size(50))) == 375
    finally:
        client.drop_database(f"driver_{compressor}")
