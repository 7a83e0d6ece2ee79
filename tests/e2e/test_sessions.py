"""Logical sessions through pymongo: the server holds every session a command names
(`$listLocalSessions`), writes them to `config.system.sessions` with a TTL index
(`refreshLogicalSessionCacheNow`, `$listSessions`), forgets ended ones, and under access
control lists a user's own sessions freely and others' only with `listSessions`.
"""

from __future__ import annotations

import datetime
import hashlib

import pytest
from pymongo.errors import OperationFailure

from helpers import raises_code


def ids_of(sessions) -> set:
    return {s["_id"]["id"] for s in sessions}


def test_sessions_are_held_stored_listed_and_ended(start_server):
    srv = start_server("--setParameter", "enableTestCommands=1")
    client = srv.client()
    first, second = client.start_session(), client.start_session()
    client.test.c.insert_one({"x": 1}, session=first)
    client.test.c.find_one({}, session=second)
    ours = {first.session_id["id"], second.session_id["id"]}
    local = list(client.admin.aggregate([{"$listLocalSessions": {}}]))
    assert ours <= ids_of(local)
    anonymous = hashlib.sha256(b"").digest()
    for session in local:
        assert session["_id"]["uid"] == anonymous
        assert isinstance(session["lastUse"], datetime.datetime)
        assert "user" not in session

    client.admin.command("refreshLogicalSessionCacheNow")
    stored_sessions = client.config.system.sessions
    assert ours <= ids_of(stored_sessions.aggregate([{"$listSessions": {}}]))
    assert ours <= ids_of(stored_sessions.aggregate([{"$listSessions": {"allUsers": True}}]))
    ttl = stored_sessions.index_information()["lsidTTLIndex"]
    assert ttl["key"] == [("lastUse", 1)] and ttl["expireAfterSeconds"] == 1800

    client.admin.command("endSessions", [first.session_id])
    assert first.session_id["id"] not in ids_of(
        client.admin.aggregate([{"$listLocalSessions": {}}])
    )
    client.admin.command("refreshLogicalSessionCacheNow")
    stored = ids_of(stored_sessions.aggregate([{"$listSessions": {}}]))
    assert first.session_id["id"] not in stored and second.session_id["id"] in stored

    # Misuse gets mongod's errors.
    with raises_code("InvalidNamespace"):
        list(client.test.c.aggregate([{"$listSessions": {}}]))
    with raises_code("TypeMismatch"):
        list(stored_sessions.aggregate([{"$listSessions": {"allUsers": 1}}]))
    with pytest.raises(OperationFailure) as not_first:
        list(stored_sessions.aggregate([{"$match": {}}, {"$listSessions": {}}]))
    assert not_first.value.code == 40602


def test_refresh_is_a_test_command(own_server):
    with raises_code("CommandNotFound"):
        own_server.client().admin.command("refreshLogicalSessionCacheNow")


def test_users_see_their_own_sessions(start_server):
    srv = start_server("--auth", "--setParameter", "enableTestCommands=1")
    srv.client().admin.command("createUser", "root", pwd="root-pw", roles=["root"])
    root = srv.client(username="root", password="root-pw", authSource="admin")
    for name in ("alice", "bob"):
        root.admin.command(
            "createUser", name, pwd=name + "-pw", roles=[{"role": "readWrite", "db": "test"}]
        )
    alice = srv.client(username="alice", password="alice-pw", authSource="admin")
    bob = srv.client(username="bob", password="bob-pw", authSource="admin")
    with alice.start_session() as mine, bob.start_session() as theirs:
        alice.test.c.find_one({}, session=mine)
        bob.test.c.find_one({}, session=theirs)
        own = list(alice.admin.aggregate([{"$listLocalSessions": {}}]))
        assert mine.session_id["id"] in ids_of(own)
        assert theirs.session_id["id"] not in ids_of(own)
        digest = hashlib.sha256(b"alice@admin").digest()
        assert all(s["_id"]["uid"] == digest and s["user"] == {"name": "alice@admin"} for s in own)
        with raises_code("Unauthorized"):
            list(alice.admin.aggregate([{"$listLocalSessions": {"allUsers": True}}]))
        everyone = ids_of(root.admin.aggregate([{"$listLocalSessions": {"allUsers": True}}]))
        assert {mine.session_id["id"], theirs.session_id["id"]} <= everyone
        bobs = list(
            root.admin.aggregate(
                [{"$listLocalSessions": {"users": [{"user": "bob", "db": "admin"}]}}]
            )
        )
        assert theirs.session_id["id"] in ids_of(bobs) and mine.session_id["id"] not in ids_of(bobs)
        root.admin.command("refreshLogicalSessionCacheNow")
        stored = root.config.system.sessions.aggregate(
            [{"$listSessions": {"users": [{"user": "alice", "db": "admin"}]}}]
        )
        assert mine.session_id["id"] in ids_of(stored)


def test_kill_commands_check_their_arguments_as_mongod(client):
    # killAllSessions runs on any database, with [] for every user or {user, db} pairs.
    assert client.test.command("killAllSessions", [])["ok"] == 1
    assert client.test.command("killAllSessions", [{"user": "u", "db": "test"}])["ok"] == 1
    for value, code in [
        (1, 14),
        (["u"], 14),
        ([{"user": "u"}], 40414),
        ([{"user": None, "db": "test"}], 40414),
        ([{"user": 1, "db": "test"}], 14),
        ([{"user": "u", "db": "test", "x": 1}], 40415),
    ]:
        with pytest.raises(OperationFailure) as info:
            client.admin.command("killAllSessions", value)
        assert info.value.code == code, value
    for value in [1, [1], ["lsid"]]:
        with pytest.raises(OperationFailure) as info:
            client.admin.command("killSessions", value)
        assert info.value.code == 14, value
