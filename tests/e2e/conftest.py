"""Fixtures for the end-to-end suite: a real `basalt` process and pymongo clients.

One server serves the whole session (starting one per test would dominate the run
time); each test gets its own database, dropped afterwards, so tests do not see each
other's data. Tests that restart or kill the server take `own_server`, a private
process with a private data directory. After every test the shared server must still
be running and must not have logged a panic: a request that crashes or panics the
server fails the test that sent it.
"""

from __future__ import annotations

import re

import pytest

from basalt_server import BasaltServer, ReplicaSet, default_binary


@pytest.fixture(scope="session")
def basalt_binary():
    binary = default_binary()
    if not binary.is_file():
        pytest.fail(f"no basalt binary at {binary}: run `make build` first or set BASALT_BIN")
    return binary


def _new_server(binary, directory) -> BasaltServer:
    return BasaltServer(binary, directory / "data", directory / "basalt.log")


@pytest.fixture(scope="session")
def server(basalt_binary, tmp_path_factory):
    srv = _new_server(basalt_binary, tmp_path_factory.mktemp("basalt")).start()
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def client(server):
    return server.client()


@pytest.fixture(autouse=True)
def _server_survives(request):
    """Fails a test after which the shared server died or logged a panic."""
    if "server" not in request.fixturenames:
        yield
        return
    srv = request.getfixturevalue("server")
    panics_before = len(srv.panics())
    yield
    assert srv.is_alive(), f"basalt died during this test; log:\n{srv.log_tail()}"
    new_panics = srv.panics()[panics_before:]
    assert not new_panics, "basalt panicked during this test:\n" + "\n".join(new_panics)


def _database_name(request) -> str:
    # Database names may not contain . $ / \ space or quotes, and are at most 63 bytes.
    name = re.sub(r"[^A-Za-z0-9_]", "_", request.node.name)
    return ("t_" + name)[:63]


@pytest.fixture
def db(client, request):
    """A database only this test uses, dropped afterwards."""
    name = _database_name(request)
    client.drop_database(name)
    yield client[name]
    client.drop_database(name)


@pytest.fixture
def coll(db):
    return db["c"]


@pytest.fixture
def own_server(start_server):
    """A private server that the test may stop, restart or kill -9."""
    return start_server()


@pytest.fixture
def start_server(basalt_binary, tmp_path):
    """Starts private servers with extra arguments (`start_server("--maxConns", "10")`,
    keyword arguments go to BasaltServer); each is checked for panics and killed at the
    end of the test."""
    started = []

    def start(*extra_args: str, **options) -> BasaltServer:
        directory = tmp_path / f"server{len(started)}"
        srv = BasaltServer(
            basalt_binary,
            directory / "data",
            directory / "basalt.log",
            extra_args=list(extra_args),
            **options,
        )
        started.append(srv)
        return srv.start()

    yield start
    _kill_and_check_panics(started)


@pytest.fixture
def start_replica_set(basalt_binary, tmp_path):
    """Starts private replica sets (`start_replica_set(members=3)`), initiated and with a
    primary; each is checked for panics and killed at the end of the test."""
    started = []

    def start(
        members: int = 3,
        name: str = "rs0",
        extra_args=None,
        client_options=None,
        partitionable: bool = False,
    ) -> ReplicaSet:
        directory = tmp_path / f"set{len(started)}"
        cluster = ReplicaSet(
            basalt_binary, directory, members, name, extra_args, client_options, partitionable
        )
        started.append(cluster)
        return cluster.start()

    yield start
    _kill_and_check_panics(started)


@pytest.fixture
def one_member_set(start_replica_set):
    """A one-member replica set of the test's own: what transactions and change streams
    need on one machine."""
    return start_replica_set(members=1)


def _kill_and_check_panics(started) -> None:
    """Kills every server (or set) a test started, then fails if any of them panicked."""
    for process in started:
        process.kill()
    panics = [line for process in started for line in process.panics()]
    assert not panics, "basalt panicked:\n" + "\n".join(panics)
