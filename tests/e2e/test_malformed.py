"""Malformed wire messages: the server answers with an error or closes that
connection, never hangs, crashes or panics, and keeps serving everyone else.

Anything can connect to a database port: port scanners, HTTP clients, buggy or
hostile drivers. Each case sends one broken message on a fresh socket and expects an
error reply (ok: 0) or a closed connection within a few seconds; afterwards a normal
client must still work (the autouse fixture in conftest.py also fails the test if
the server died or logged a panic).
"""

from __future__ import annotations

import random
import socket
import struct
import zlib

import bson
import pytest
import snappy

import wire

REPLY_TIMEOUT_S = 10.0
PING = bson.encode({"ping": 1, "$db": "admin"})


def _doc(elements: bytes) -> bytes:
    """A BSON document around raw element bytes, with a correct length prefix."""
    return struct.pack("<i", 4 + len(elements) + 1) + elements + b"\x00"


def _msg(body: bytes, flags: int = 0, tail: bytes = b"") -> bytes:
    return wire.frame(wire.OP_MSG, struct.pack("<I", flags) + b"\x00" + body + tail)


def _compressed(compressor_id: int, size: int, data: bytes) -> bytes:
    return wire.frame(
        wire.OP_COMPRESSED, struct.pack("<iiB", wire.OP_MSG, size, compressor_id) + data
    )


def _nested(depth: int) -> bytes:
    """{find: "c", filter: {a: {a: {... depth levels ...}}}, $db: "test"} as raw BSON."""
    inner = _doc(b"")
    for _ in range(depth):
        inner = _doc(b"\x03a\x00" + inner)
    find = b"\x02find\x00" + struct.pack("<i", 2) + b"c\x00"
    database = b"\x02$db\x00" + struct.pack("<i", 5) + b"test\x00"
    return _doc(find + b"\x03filter\x00" + inner + database)


# name -> (bytes to send, whether to half-close the socket afterwards). Only messages
# that are cut short need the half-close: the server cannot know they are incomplete.
CASES = {
    "truncated header": (struct.pack("<ii", 100, 1), True),
    "truncated body": (struct.pack("<iiii", 100, 1, 0, wire.OP_MSG) + b"\x00" * 20, True),
    "length 0": (struct.pack("<iiii", 0, 1, 0, wire.OP_MSG), False),
    "length 15": (struct.pack("<iiii", 15, 1, 0, wire.OP_MSG), False),
    "negative length": (struct.pack("<iiii", -1, 1, 0, wire.OP_MSG), False),
    "length over 48 MB": (struct.pack("<iiii", 48_000_001, 1, 0, wire.OP_MSG), False),
    "length 2 GiB": (struct.pack("<iiii", 2**31 - 1, 1, 0, wire.OP_MSG), False),
    "BSON length past the message": (_msg(struct.pack("<i", 1000) + PING[4:]), False),
    "BSON length below 5": (_msg(struct.pack("<i", 2) + PING[4:]), False),
    "BSON without terminator": (_msg(PING[:-1] + b"\x01"), False),
    "unknown BSON element type": (_msg(_doc(b"\x99ping\x00" + struct.pack("<i", 1))), False),
    "BSON string length overrun": (_msg(_doc(b"\x02$db\x00" + struct.pack("<i", 1000) + b"admin\x00")), False),
    "BSON string not NUL-terminated": (_msg(_doc(b"\x02$db\x00" + struct.pack("<i", 6) + b"adminX")), False),
    "BSON negative string length": (_msg(_doc(b"\x02$db\x00" + struct.pack("<i", -5) + b"admin\x00")), False),
    "empty command document": (_msg(_doc(b"")), False),
    "unknown section kind": (wire.frame(wire.OP_MSG, struct.pack("<I", 0) + b"\x07" + PING), False),
    "no body section": (wire.frame(wire.OP_MSG, struct.pack("<I", 0)), False),
    "two body sections": (_msg(PING, tail=b"\x00" + PING), False),
    "sequence overruns message": (_msg(PING, tail=b"\x01" + struct.pack("<i", 5000) + b"documents\x00" + PING), False),
    "sequence size too small": (_msg(PING, tail=b"\x01" + struct.pack("<i", 2) + b"documents\x00"), False),
    "unknown required flag bit": (_msg(PING, flags=1 << 4), False),
    "wrong checksum": (_msg(PING, flags=1, tail=b"\xde\xad\xbe\xef"), False),
    "unknown opcode": (wire.frame(9999, b"\x00" * 32), False),
    "OP_QUERY name without NUL": (wire.frame(wire.OP_QUERY, struct.pack("<i", 0) + b"admin.$cmd"), False),
    "compressed with unknown compressor": (_compressed(99, len(PING) + 5, b"\x00" * 40), False),
    "compressed size lies": (_compressed(1, 2**31 - 1, snappy.compress(b"\x00\x00\x00\x00\x00" + PING)), False),
    "compressed negative size": (_compressed(2, -1, zlib.compress(b"\x00\x00\x00\x00\x00" + PING)), False),
    "corrupt zlib": (_compressed(2, len(PING) + 5, b"\x78\x9c" + b"\xff" * 40), False),
    "corrupt snappy": (_compressed(1, len(PING) + 5, b"\xff\xff\xff\xff\x0f" + b"\x01" * 40), False),
    "compressed OP_COMPRESSED": (wire.frame(wire.OP_COMPRESSED, struct.pack("<iiB", wire.OP_COMPRESSED, 30, 0) + b"\x00" * 30), False),
    "nesting 20 000 deep": (_msg(_nested(20_000)), False),
    "HTTP request": (b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n", False),
    "random bytes": (random.Random(1234).randbytes(4096), False),
}  # fmt: skip


def _outcome(conn: wire.RawConnection) -> str:
    """'closed', or 'error reply'; fails on a success reply or a silent server."""
    try:
        message = conn.read_message()
    except TimeoutError:
        pytest.fail(f"server neither replied nor closed within {REPLY_TIMEOUT_S}s")
    if message is None:
        return "closed"
    reply = wire.parse_reply(*message)
    assert reply.doc.get("ok") == 0, f"malformed message got a success reply: {reply.doc}"
    return "error reply"


@pytest.mark.parametrize("data, half_close", CASES.values(), ids=CASES.keys())
def test_malformed_message(server, coll, data, half_close):
    with wire.RawConnection(server.port, timeout_s=REPLY_TIMEOUT_S) as conn:
        try:
            conn.send(data)
            if half_close:
                conn.sock.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server already closed on the first bytes
        assert _outcome(conn) in ("closed", "error reply")

    # Everyone else is still served, on new and on existing connections.
    with wire.RawConnection(server.port) as fresh:
        assert fresh.command({"ping": 1, "$db": "admin"}).doc["ok"] == 1
    coll.insert_one({"case": "after"})
    assert coll.count_documents({"case": "after"}) == 1


def test_many_bad_connections_at_once(server, client):
    """A burst of broken connections, left open, does not starve normal clients."""
    conns = [wire.RawConnection(server.port) for _ in range(50)]
    try:
        for conn in conns:
            conn.send(struct.pack("<ii", 64, 1))  # half a header, left hanging
        assert client.admin.command("ping")["ok"] == 1
        with wire.RawConnection(server.port) as fresh:
            assert fresh.command({"ping": 1, "$db": "admin"}).doc["ok"] == 1
    finally:
        for conn in conns:
            conn.close()
