"""Connections: storms of them, the --maxConns limit, and what serverStatus says of them.

An application fleet that starts, or whose pools refill after a failover, opens
thousands of connections at once; each must be answered, and the server must go on
serving afterwards. With `--maxConns N`, mongod accepts connection N + 1 and closes it
at once without a reply, logs it and counts it in `connections.rejected`, and serves
the others unharmed; a slot freed is usable again. How fast a storm is answered is a
benchmark's business (`basalt bench --workloads conns`), not a timed test's: these tests
only bound their waits.
"""

from __future__ import annotations

import json
import resource
import selectors
import socket
import struct
import threading
import time

import pytest
from bson.int64 import Int64
from pymongo.errors import OperationFailure

import wire
from basalt_server import BasaltServer

STORM_CONNECTIONS = 5_000
STORM_TIMEOUT_S = 120.0
SETTLE_TIMEOUT_S = 30.0
MAX_CONNS = 10

CONNECTIONS_FIELDS = [
    "current",
    "available",
    "totalCreated",
    "rejected",
    "active",
    "threaded",
    "exhaustIsMaster",
    "exhaustHello",
    "awaitingTopologyChanges",
    "loadBalanced",
]


@pytest.fixture
def open_files_for_a_storm():
    """Each raw connection is a descriptor of this process too."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < STORM_CONNECTIONS + 200:
        pytest.skip(f"the open files hard limit ({hard}) is too low for a storm")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _hello(request_id: int) -> bytes:
    return wire.frame(wire.OP_MSG, wire.op_msg_payload({"hello": 1, "$db": "admin"}), request_id)


def _storm(port: int, count: int) -> tuple[list[socket.socket], dict[int, str]]:
    """Opens `count` connections at once and sends hello on each: the sockets, and what
    went wrong on those that got no ok reply."""
    selector = selectors.DefaultSelector()
    sockets, received, failures = [], {}, {}
    for i in range(count):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        sock.connect_ex(("127.0.0.1", port))
        sockets.append(sock)
        selector.register(sock, selectors.EVENT_WRITE, i)
    pending = count
    deadline = time.monotonic() + STORM_TIMEOUT_S
    while pending and time.monotonic() < deadline:
        for key, events in selector.select(timeout=1.0):
            sock, i = key.fileobj, key.data
            try:
                if events & selectors.EVENT_WRITE:
                    sock.send(_hello(i + 1))
                    received[i] = b""
                    selector.modify(sock, selectors.EVENT_READ, i)
                    continue
                chunk = sock.recv(65536)
            except OSError as exc:
                chunk, failures[i] = b"", f"{type(exc).__name__}: {exc}"
            if not chunk:
                failures.setdefault(i, "closed without a reply")
            else:
                received[i] += chunk
                data = received[i]
                if len(data) < 4 or len(data) < struct.unpack_from("<i", data)[0]:
                    continue
                header = wire.HEADER.unpack_from(data)
                reply = wire.parse_reply(header[3], header[2], data[wire.HEADER.size :])
                if reply.response_to != i + 1 or reply.doc.get("ok") != 1:
                    failures[i] = f"reply {reply.doc}"
            selector.unregister(sock)
            pending -= 1
    for key in list(selector.get_map().values()):
        failures.setdefault(key.data, f"no reply within {STORM_TIMEOUT_S}s")
    selector.close()
    return sockets, failures


def _server_status(conn: wire.RawConnection) -> dict:
    return conn.command({"serverStatus": 1, "$db": "admin"}).doc


def _wait_for(conn: wire.RawConnection, condition, what: str) -> dict:
    """serverStatus once `condition(status)` holds; fails after SETTLE_TIMEOUT_S."""
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while True:
        status = _server_status(conn)
        if condition(status):
            return status
        if time.monotonic() > deadline:
            pytest.fail(f"{what} not within {SETTLE_TIMEOUT_S}s: {status['connections']}")
        time.sleep(0.05)


def test_a_storm_of_connections_is_answered(own_server, open_files_for_a_storm):
    sockets, failures = _storm(own_server.port, STORM_CONNECTIONS)
    try:
        assert not failures, (
            f"{len(failures)} of {STORM_CONNECTIONS} connections got no ok hello reply; "
            f"some: {sorted(failures.items())[:5]}"
        )
        with wire.RawConnection(own_server.port) as conn:
            connections = _server_status(conn)["connections"]
            assert connections["current"] >= STORM_CONNECTIONS + 1
            assert connections["totalCreated"] >= STORM_CONNECTIONS + 1
            assert connections["rejected"] == 0
    finally:
        for sock in sockets:
            sock.close()
    client = own_server.client()
    client.storm.c.insert_one({"_id": 1, "after": "storm"})
    assert client.storm.c.find_one({"_id": 1})["after"] == "storm"
    with wire.RawConnection(own_server.port) as conn:
        # The storm's threads end; the client's connections stay.
        _wait_for(
            conn, lambda s: s["connections"]["current"] < 10, "the storm's connections closing"
        )


@pytest.fixture
def limited_server(start_server):
    """A server with --maxConns 10 that logs connections (no --quiet)."""
    return start_server("--maxConns", str(MAX_CONNS), quiet=False)


def _refused(port: int) -> bool:
    """Whether a new connection is closed without a reply to its hello."""
    with wire.RawConnection(port, timeout_s=10.0) as conn:
        try:
            conn.send(_hello(1))
        except (BrokenPipeError, ConnectionResetError):
            return True
        return conn.read_message() is None


def test_max_conns_closes_connections_beyond_the_limit(limited_server):
    port = limited_server.port
    first = wire.RawConnection(port)
    conns = [first]
    try:
        # The startup probe's connections may still be closing.
        _wait_for(first, lambda s: s["connections"]["current"] == 1, "one connection open")
        for _ in range(MAX_CONNS - 1):
            conns.append(wire.RawConnection(port))
            assert conns[-1].command({"hello": 1, "$db": "admin"}).doc["ok"] == 1

        assert _refused(port)
        status = _server_status(first)
        connections = status["connections"]
        assert connections["current"] == MAX_CONNS
        assert connections["available"] == 0
        assert connections["rejected"] == 1
        for conn in conns:
            assert conn.command({"ping": 1, "$db": "admin"}).doc["ok"] == 1

        log = first.command({"getLog": "global", "$db": "admin"}).doc["log"]
        refusals = [
            line
            for line in log
            if "Connection refused because there are too many open connections" in line
        ]
        assert len(refusals) == 1, log[-5:]
        attr = json.loads(refusals[0])["attr"]
        assert attr["remote"].startswith("127.0.0.1:") and attr["connectionCount"] == 10

        for conn in conns[-3:]:
            conn.close()
        del conns[-3:]
        _wait_for(
            first, lambda s: s["connections"]["current"] == MAX_CONNS - 3, "3 connections closing"
        )
        for _ in range(3):
            conns.append(wire.RawConnection(port))
            assert conns[-1].command({"hello": 1, "$db": "admin"}).doc["ok"] == 1
        assert _refused(port)
        assert _server_status(first)["connections"]["rejected"] == 2
    finally:
        for conn in conns:
            conn.close()


def test_max_conns_must_be_a_positive_number(basalt_binary, tmp_path):
    refusals = {
        "0": "invalid value '0' for '--maxConns <N>'",
        "x": "invalid value 'x' for '--maxConns <N>'",
        # Read as a flag of its own.
        "-1": "unexpected argument '-1' found",
    }
    for bad, refusal in refusals.items():
        srv = BasaltServer(
            basalt_binary,
            tmp_path / "data",
            tmp_path / "basalt.log",
            extra_args=["--maxConns", bad],
        )
        with pytest.raises(RuntimeError, match="exited"):
            srv.start(timeout_s=20)
        assert refusal in srv.log_text()


def test_server_status_connections_fields_and_types(client):
    status = client.admin.command("serverStatus")
    connections = status["connections"]
    assert list(connections) == CONNECTIONS_FIELDS
    for name in CONNECTIONS_FIELDS[:-1]:
        assert type(connections[name]) is int, name  # int32: pymongo decodes int64 as Int64
    assert type(connections["loadBalanced"]) is Int64
    assert connections["current"] >= 1
    assert connections["available"] > 0
    assert connections["totalCreated"] >= connections["current"]
    assert connections["active"] >= 1  # this serverStatus
    assert connections["threaded"] == connections["current"]
    assert connections["exhaustIsMaster"] == connections["exhaustHello"] == 0
    assert connections["loadBalanced"] == 0

    basalt = status["basalt"]["connections"]
    assert list(basalt) == ["bufferBytes", "threadStackBytes"]
    assert type(basalt["bufferBytes"]) is Int64 and basalt["bufferBytes"] > 0
    assert type(basalt["threadStackBytes"]) is Int64 and basalt["threadStackBytes"] >= 1 << 20


def test_active_and_awaiting_count_a_waiting_hello(own_server):
    """An awaitable hello is an operation in progress that waits for a topology change."""
    with wire.RawConnection(own_server.port) as conn, wire.RawConnection(own_server.port) as waiter:
        before = _wait_for(
            conn, lambda s: s["connections"]["awaitingTopologyChanges"] == 0, "no hello waiting"
        )["connections"]
        assert before["active"] == 1
        version = waiter.command({"hello": 1, "$db": "admin"}).doc["topologyVersion"]
        awaitable = {"hello": 1, "topologyVersion": version, "maxAwaitTimeMS": 1500, "$db": "admin"}
        replies = []
        thread = threading.Thread(target=lambda: replies.append(waiter.command(awaitable).doc))
        thread.start()
        try:
            during = _wait_for(
                conn, lambda s: s["connections"]["awaitingTopologyChanges"] == 1, "hello waiting"
            )["connections"]
            assert during["active"] == 2
        finally:
            thread.join(timeout=SETTLE_TIMEOUT_S)
        assert replies and replies[0]["ok"] == 1
        after = _server_status(conn)["connections"]
        assert after["awaitingTopologyChanges"] == 0 and after["active"] == 1


def _nested(depth: int, leaf):
    for _ in range(depth):
        leaf = {"a": leaf}
    return leaf


def test_the_deepest_commands_fit_a_connection_thread(coll):
    """Commands recurse over nesting, which BSON caps at 200 levels, and JavaScript may
    recurse 512 KiB deeper: none of it may overflow a connection thread's stack (which
    would abort the server)."""
    depth = 190
    path = ".".join(["a"] * depth) + ".x"
    coll.insert_one({"_id": 1, "n": 1, **_nested(depth, {"x": 1})})
    coll.update_one({"_id": 1}, {"$set": {path: 2}})
    assert coll.find_one({path: 2}, {path: 1})["_id"] == 1
    assert [d["_id"] for d in coll.find({}, sort=[(path, 1)])] == [1]

    array = 1
    for _ in range(depth):
        array = [array]
    coll.insert_one({"_id": 2, "n": 1, "arr": array})
    assert coll.find_one({"arr": array})["_id"] == 2

    condition = {"_id": 1}
    for _ in range(95):
        condition = {"$and": [condition, {"n": 1}]}
    assert coll.count_documents(condition) == 1

    deep_sum = "$n"
    for _ in range(95):
        deep_sum = {"$add": [deep_sum, 1]}
    got = list(coll.aggregate([{"$match": {"_id": 1}}, {"$project": {"v": deep_sum}}]))
    assert got == [{"_id": 1, "v": 96}]

    recursion = "function(n) { function f(k) { return k == 0 ? 0 : 1 + f(k - 1); } return f(n); }"
    deep_js = {"$function": {"body": recursion, "args": [10_000_000], "lang": "js"}}
    for _ in range(90):
        deep_js = {"$add": [deep_js, 1]}
    with pytest.raises(OperationFailure, match="Maximum call stack size exceeded"):
        list(coll.aggregate([{"$match": {"_id": 1}}, {"$project": {"v": deep_js}}]))
