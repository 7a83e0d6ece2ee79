"""Replica sets as drivers see them: `--replSet`, replSetInitiate, hello's fields,
writes through the replicated log, reads from secondaries, MongoDB's errors on the wrong
member, retryable writes answered once, stepDown, failover after `kill -9`, and a member
that was down catching up.

Each test starts its own members on 127.0.0.1 (the `start_replica_set` fixture).
"""

from __future__ import annotations

import datetime
import time
import uuid

import pymongo
import pytest
from bson import Binary, ObjectId
from bson.int64 import Int64
from pymongo.errors import NotPrimaryError, OperationFailure, PyMongoError, WriteConcernError
from pymongo.read_preferences import ReadPreference, Secondary
from pymongo.write_concern import WriteConcern

from basalt_server import ReplicaSet
from helpers import count_on, reader_of, wait_until
from wire import RawConnection


def test_one_member_set_is_a_primary(start_server):
    member = start_server("--replSet", "solo")
    client = member.client(directConnection=True)
    hello = client.admin.command("hello")
    assert hello["isWritablePrimary"] is False
    assert hello["isreplicaset"] is True
    assert client.admin.command("replSetInitiate")["ok"] == 1.0
    wait_until(lambda: client.admin.command("hello")["isWritablePrimary"], what="a primary")
    hello = client.admin.command("hello")
    host = f"127.0.0.1:{member.port}"
    assert hello["setName"] == "solo"
    assert hello["hosts"] == [host]
    assert hello["primary"] == hello["me"] == host
    assert hello["setVersion"] == 1
    assert isinstance(hello["electionId"], ObjectId)
    assert hello["lastWrite"]["opTime"]["t"] >= 1
    with pymongo.MongoClient(member.uri, replicaSet="solo", serverSelectionTimeoutMS=10_000) as rs:
        rs.test.c.insert_many([{"i": i} for i in range(10)])
        assert rs.test.c.count_documents({}) == 10
        assert rs.primary == ("127.0.0.1", member.port)
    with pytest.raises(OperationFailure) as again:
        client.admin.command("replSetInitiate")
    assert again.value.code == 23  # AlreadyInitialized


def test_the_set_survives_a_restart(start_server):
    member = start_server("--replSet", "solo")
    client = member.client(directConnection=True)
    client.admin.command("replSetInitiate")
    wait_until(lambda: client.admin.command("hello")["isWritablePrimary"], what="a primary")
    client.test.c.insert_many([{"i": i} for i in range(5)])
    member.restart(hard=True)
    client = member.client(directConnection=True)
    wait_until(lambda: client.admin.command("hello")["isWritablePrimary"], what="a primary")
    assert client.test.c.count_documents({}) == 5, "applied entries are not applied twice"
    client.test.c.insert_one({"i": 5})
    assert client.test.c.count_documents({}) == 6


def test_three_members_replicate_and_serve_secondary_reads(start_replica_set):
    cluster = start_replica_set(3)
    client = cluster.client()
    client.test.c.insert_many([{"i": i} for i in range(100)])
    client.test.c.create_index("i")
    client.test.c.update_many(
        {"i": {"$lt": 10}}, {"$set": {"small": True}, "$currentDate": {"at": True}}
    )
    client.test.c.delete_many({"i": {"$gte": 90}})
    expected = list(client.test.c.find({}, sort=[("i", 1)]))
    assert len(expected) == 90
    hosts = client.admin.command("hello")["hosts"]
    assert sorted(hosts) == sorted(cluster.hosts)
    for member in cluster.members:
        with reader_of(member) as direct:
            wait_until(
                lambda direct=direct: list(direct.test.c.find({}, sort=[("i", 1)])) == expected,
                what=f"the same documents on {member.port}",
            )
            names = [ix["name"] for ix in direct.test.c.list_indexes()]
            assert "i_1" in names
    secondary_reads = client.test.get_collection("c", read_preference=ReadPreference.SECONDARY)
    assert secondary_reads.count_documents({}) == 90
    # Secondaries count what they applied in opcountersRepl (an insert per document, an
    # update or delete per statement, createIndexes as a command), not in opcounters.
    primary = cluster.primary()
    with reader_of(primary) as direct:
        status = direct.admin.command("serverStatus")
    assert set(status["opcountersRepl"].values()) == {0}
    assert status["opcounters"]["insert"] >= 100 and status["opcounters"]["delete"] >= 1
    for member in cluster.secondaries():
        with reader_of(member) as direct:
            status = direct.admin.command("serverStatus")
        applied, own = status["opcountersRepl"], status["opcounters"]
        assert applied["insert"] >= 100 and applied["update"] >= 1, applied
        assert applied["delete"] >= 1 and applied["command"] >= 1, applied
        assert own["insert"] == own["update"] == own["delete"] == 0, own

    def states():
        status = client.admin.command("replSetGetStatus")
        return sorted(m["stateStr"] for m in status["members"])

    # The members' heartbeats say how the others are, within a second.
    wait_until(lambda: states() == ["PRIMARY", "SECONDARY", "SECONDARY"], what="all healthy")
    status = client.admin.command("replSetGetStatus")
    assert status["set"] == "rs0" and status["myState"] == 1
    config = client.admin.command("replSetGetConfig")["config"]
    assert config["_id"] == "rs0" and len(config["members"]) == 3
    assert config["members"][0]["priority"] == 1.0 and config["members"][0]["votes"] == 1


def test_the_wrong_member_gets_mongodb_s_errors(start_replica_set):
    cluster = start_replica_set(3)
    secondary = cluster.secondaries()[0]
    direct = cluster.direct(secondary)
    # pymongo raises NotPrimaryError (not an OperationFailure) for these codes.
    with pytest.raises(PyMongoError) as write:
        direct.test.command("insert", "c", documents=[{"x": 1}])
    assert write.value.details["code"] == 10107  # NotWritablePrimary
    retryable = raw_command(
        secondary,
        {
            "insert": "c",
            "documents": [{"x": 1}],
            "lsid": {"id": Binary(uuid.uuid4().bytes, 4)},
            "txnNumber": Int64(1),
            "$db": "test",
        },
    )
    assert retryable["code"] == 10107
    assert retryable["errorLabels"] == ["RetryableWriteError"]
    # Sent as written: a driver connected directly asks for primaryPreferred itself.
    read = raw_command(secondary, {"find": "c", "$db": "test"})
    assert read["code"] == 13435  # NotPrimaryNoSecondaryOk
    assert direct.test.command("find", "c", **{"$readPreference": {"mode": "secondary"}})["ok"]
    with pytest.raises(PyMongoError) as down:
        direct.admin.command("replSetStepDown", 10)
    assert down.value.details["code"] == 10107
    # A write concern the set cannot satisfy: the write is done, and the reply says so
    # in writeConcernError, as mongod's.
    primary = cluster.client().test
    for concern, code in (({"w": 5}, 100), ({"w": "dc-east"}, 79)):
        reply = primary.command(
            "insert", "wc", documents=[{"w": str(concern)}], writeConcern=concern
        )
        assert reply["n"] == 1
        assert reply["writeConcernError"]["code"] == code
        assert reply["writeConcernError"]["errInfo"]["writeConcern"] == concern
    assert primary.wc.count_documents({}) == 2


def test_replication_commands_refuse_bad_input(start_replica_set, start_server):
    cluster = start_replica_set(3)
    primary = cluster.wait_for_primary()
    admin = cluster.direct(primary).admin
    with pytest.raises(OperationFailure) as frozen:
        admin.command("replSetFreeze", 10)
    assert frozen.value.code == 95  # NotSecondary
    with pytest.raises(OperationFailure) as not_a_config:
        admin.command("replSetReconfig", 1)
    assert not_a_config.value.code == 14  # TypeMismatch
    with pytest.raises(OperationFailure) as bad_secs:
        admin.command("replSetFreeze", -1)
    assert bad_secs.value.code == 2  # BadValue
    # A member-to-member message that is not one: an error, and the member lives on.
    for body in (
        {"replSetRaft": "append", "payload": Binary(b"\xff\x00garbage")},
        {"replSetRaft": "append", "payload": "text"},
        {"replSetRaft": "gossip", "payload": Binary(b"")},
        {"replSetRaft": "join", "memberId": Int64(9), "config": {"_id": "other"}},
    ):
        with pytest.raises(OperationFailure) as bad:
            admin.command(body)
        assert bad.value.code in (2, 93), body
    # Raft's messages travel in a `payload` document sequence: garbage there, or pieces
    # without their bytes, get BadValue too.
    for pieces in ([{"data": Binary(b"\xff\x00garbage")}], [{"nodata": 1}]):
        with RawConnection(primary.port) as connection:
            reply = connection.command(
                {"replSetRaft": "append", "$db": "admin"}, sequences={"payload": pieces}
            ).doc
        assert reply["ok"] == 0.0 and reply["code"] == 2, pieces
    assert admin.command("hello")["isWritablePrimary"]
    secondary = cluster.direct(cluster.secondaries()[0]).admin
    assert secondary.command("replSetFreeze", 30)["ok"] == 1.0
    assert secondary.command("replSetFreeze", 0)["info"] == "unfreezing"

    solo = start_server("--replSet", "solo")
    lone = solo.client(directConnection=True).admin
    for command in ("replSetGetStatus", "replSetGetConfig", "replSetFreeze"):
        with pytest.raises(OperationFailure) as uninitiated:
            lone.command(command)
        assert uninitiated.value.code == 94, command  # NotYetInitialized
    lone.command("replSetInitiate")
    wait_until(lambda: lone.command("hello")["isWritablePrimary"], what="a primary")
    with pytest.raises(OperationFailure) as alone:
        lone.command("replSetStepDown", 10)
    assert alone.value.code == 262  # ExceededTimeLimit: no electable secondary


def test_ttl_expiry_is_replicated(start_replica_set, basalt_binary, tmp_path):
    cluster = ReplicaSet(basalt_binary, tmp_path / "ttl", 3)
    for member in cluster.members:
        member.extra_args += ["--setParameter", "ttlMonitorSleepSecs=1"]
    try:
        cluster.start()
        client = cluster.client()
        old = datetime.datetime(2000, 1, 1)
        client.test.events.create_index("at", expireAfterSeconds=60)
        client.test.events.insert_many(
            [{"_id": 1, "at": old}, {"_id": 2, "at": [old]}, {"_id": 3, "at": "not a date"}]
        )
        client.test.events.insert_one({"_id": 4, "at": datetime.datetime.now(datetime.UTC)})
        before = last_log_index(client)
        # Only the primary expires documents, with a delete through the log that every
        # member applies (members expiring on their own would add no entry).
        for member in cluster.members:
            wait_until(
                lambda member=member: ids_on(member) == [3, 4], what=f"expiry on {member.port}"
            )
            with cluster.direct(member) as direct:
                assert last_log_index(direct) > before
    finally:
        assert not cluster.panics()
        cluster.kill()


def last_log_index(client) -> int:
    """The index of the last log entry a member applied (its optime's increment)."""
    return client.admin.command("hello")["lastWrite"]["opTime"]["ts"].inc


def ids_on(member) -> list:
    with reader_of(member) as client:
        return sorted(d["_id"] for d in client.test.events.find())


def test_bad_configs_are_refused(start_server):
    member = start_server("--replSet", "rs0")
    client = member.client(directConnection=True)
    host = f"127.0.0.1:{member.port}"

    def code(config):
        with pytest.raises(OperationFailure) as refused:
            client.admin.command("replSetInitiate", config)
        return refused.value.code

    assert code({"_id": "other", "members": [{"_id": 0, "host": host}]}) == 93
    assert (
        code({"_id": "rs0", "members": [{"_id": 0, "host": host}, {"_id": 1, "host": host}]}) == 93
    )
    assert code({"_id": "rs0", "members": [{"_id": 0, "host": "127.0.0.1:1"}]}) == 74
    unreachable = {
        "_id": "rs0",
        "members": [{"_id": 0, "host": host}, {"_id": 1, "host": "127.0.0.1:1"}],
    }
    assert code(unreachable) == 74
    # Nothing was initiated by the refused attempts.
    assert client.admin.command("hello")["isWritablePrimary"] is False


def test_replication_commands_on_a_standalone(own_server):
    client = own_server.client()
    for command in ("replSetGetStatus", "replSetGetConfig", "replSetInitiate"):
        with pytest.raises(OperationFailure) as refused:
            client.admin.command(command)
        assert refused.value.code == 76, command  # NoReplicationEnabled


def raw_command(member, body: dict) -> dict:
    """One command sent as written (lsid and txnNumber included), the reply as it came."""
    with RawConnection(member.port) as connection:
        return connection.command(body).doc


def test_a_retried_write_runs_once(start_replica_set):
    cluster = start_replica_set(3)
    primary = cluster.wait_for_primary()
    command = {
        "findAndModify": "counter",
        "query": {"_id": 1},
        "update": {"$inc": {"n": 1}},
        "upsert": True,
        "new": True,
        "lsid": {"id": Binary(uuid.uuid4().bytes, 4)},
        "txnNumber": Int64(7),
        "$db": "test",
    }
    first = raw_command(primary, command)
    again = raw_command(primary, command)
    assert first["ok"] == again["ok"] == 1.0
    assert first["value"] == again["value"] == {"_id": 1, "n": 1}
    older = raw_command(primary, dict(command, txnNumber=Int64(6)))
    assert older["code"] == 225  # TransactionTooOld
    newer = raw_command(primary, dict(command, txnNumber=Int64(8)))
    assert newer["value"] == {"_id": 1, "n": 2}
    # The session table is replicated: a retry reaching a new primary is answered from it.
    cluster.direct(primary).admin.command("replSetStepDown", 30)
    new = wait_until(
        lambda: (p := cluster.primary()) is not None and p is not primary and p,
        what="a new primary",
    )
    retried = raw_command(new, dict(command, txnNumber=Int64(8)))
    assert retried["value"] == {"_id": 1, "n": 2}
    assert cluster.client().test.counter.find_one({"_id": 1})["n"] == 2


def test_step_down_elects_another_member(start_replica_set):
    cluster = start_replica_set(3)
    old = cluster.wait_for_primary()
    client = cluster.client()
    client.test.c.insert_one({"before": True})
    cluster.direct(old).admin.command("replSetStepDown", 30)
    new = wait_until(
        lambda: (p := cluster.primary()) is not None and p is not old and p, what="a new primary"
    )
    assert new is not old
    client.test.c.insert_one({"after": True})
    assert client.test.c.count_documents({}) == 2
    status = cluster.direct(old).admin.command("replSetGetStatus")
    assert status["myState"] == 2


def test_failover_after_kill_loses_no_acknowledged_write(start_replica_set):
    cluster = start_replica_set(3)
    client = cluster.client(retryWrites=True, w="majority")
    acknowledged = []
    for i in range(50):
        client.test.c.insert_one({"i": i})
        acknowledged.append(i)
    old = cluster.wait_for_primary()
    old.kill()
    started = time.monotonic()
    # Retryable writes: the insert that meets the dead primary is retried on the new one.
    client.test.c.insert_one({"i": 50})
    acknowledged.append(50)
    assert time.monotonic() - started < 10
    new = cluster.wait_for_primary()
    assert new is not old
    for i in range(51, 60):
        client.test.c.insert_one({"i": i})
        acknowledged.append(i)
    stored = sorted(d["i"] for d in client.test.c.find())
    assert stored == acknowledged
    # The old primary comes back as a secondary and catches up.
    old.start()
    wait_until(lambda: count_on(old) == 60, what="the returning member caught up")
    assert cluster.wait_for_primary() is new


def test_a_partitioned_primary_steps_down_and_the_majority_goes_on(start_replica_set):
    cluster = start_replica_set(3, partitionable=True)
    client = cluster.client(retryWrites=True, w="majority")
    client.test.c.insert_many([{"_id": i} for i in range(10)])
    old = cluster.wait_for_primary()
    index = cluster.members.index(old)
    cluster.proxy.isolate(index)
    # The majority side elects another member; clients still reach the old primary,
    # which stops saying it is primary once it cannot hear a majority.
    new = wait_until(
        lambda: (p := cluster.primary()) is not None and p is not old and p,
        timeout_s=10,
        what="a primary on the majority side",
    )
    stranded = cluster.direct(old, serverSelectionTimeoutMS=2_000)
    wait_until(
        lambda: not stranded.admin.command("hello")["isWritablePrimary"],
        timeout_s=10,
        what="the isolated primary stepping down",
    )
    client.test.c.insert_one({"_id": "during"})
    # The isolated member refuses writes and linearizable reads; it serves no stale
    # majority write either.
    with pytest.raises(PyMongoError):
        stranded.test.c.insert_one({"_id": "stranded"})
    with pytest.raises(PyMongoError):
        stranded.test.get_collection(
            "c", read_concern=pymongo.read_concern.ReadConcern("linearizable")
        ).find_one({"_id": 0})
    cluster.proxy.heal()
    wait_until(lambda: count_on(old) == 11, what="the healed member caught up")
    assert cluster.wait_for_primary() is new
    assert client.test.c.find_one({"_id": "stranded"}) is None
    assert stranded.admin.command("replSetGetStatus")["myState"] == 2


def test_a_member_added_by_reconfig_copies_the_data(start_replica_set, basalt_binary):
    cluster = start_replica_set(3)
    client = cluster.client()
    client.test.c.insert_many([{"i": i} for i in range(1000)])
    fourth = cluster.add_member(basalt_binary)
    config = client.admin.command("replSetGetConfig")["config"]
    config["version"] += 1
    config["members"].append({"_id": 3, "host": f"127.0.0.1:{fourth.port}", "priority": 0})
    client.admin.command("replSetReconfig", config)
    wait_until(lambda: count_on(fourth) == 1000, what="the new member's copy")
    hello = client.admin.command("hello")
    assert f"127.0.0.1:{fourth.port}" in hello["passives"]
    assert hello["setVersion"] == config["version"]
    with pytest.raises(OperationFailure) as stale:
        client.admin.command("replSetReconfig", config)
    assert stale.value.code == 103


def test_a_large_write_goes_through_the_log_in_pieces(start_replica_set):
    """A 12 MB insert is proposed as several log entries (4 MB each at most); the client
    sees one reply with the command's own indexes, an ordered insert stops at its first
    error, and a retried command runs none of its pieces twice."""
    cluster = start_replica_set(3)
    primary = cluster.wait_for_primary()
    pad = "x" * (12 << 10)
    documents = [{"_id": i, "pad": pad} for i in range(1000)]
    documents[700]["_id"] = 5  # a duplicate key in the third piece
    lsid = {"id": Binary(uuid.uuid4().bytes, 4)}
    command = {
        "insert": "big",
        "documents": documents,
        "ordered": True,
        "lsid": lsid,
        "txnNumber": Int64(1),
        "$db": "test",
    }
    first = raw_command(primary, command)
    assert first["ok"] == 1.0
    assert first["n"] == 700
    assert [(e["index"], e["code"]) for e in first["writeErrors"]] == [(700, 11000)]
    again = raw_command(primary, command)
    assert again["n"] == 700 and again["writeErrors"] == first["writeErrors"]
    for member in cluster.members:
        wait_until(lambda m=member: count_on(m, "big") == 700, what="the pieces on every member")

    unordered = dict(command, ordered=False, txnNumber=Int64(2), insert="big2")
    reply = raw_command(primary, unordered)
    assert reply["n"] == 999
    assert [e["index"] for e in reply["writeErrors"]] == [700]
    assert count_on(primary, "big2") == 999

    # Statements a command reads decoded (a delete's) are split the same way.
    needle = "y" * (10 << 10)
    deletes = [{"q": {"_id": i, "pad": {"$ne": needle}}, "limit": 1} for i in range(600)]
    reply = raw_command(primary, {"delete": "big2", "deletes": deletes, "$db": "test"})
    assert reply["ok"] == 1.0 and reply["n"] == 600
    for member in cluster.members:
        wait_until(lambda m=member: count_on(m, "big2") == 399, what="the deletes everywhere")


def test_w_n_waits_for_n_members_and_times_out(start_replica_set):
    cluster = start_replica_set(3)
    client = cluster.client(retryWrites=False)
    every = client.test.get_collection("wn", write_concern=WriteConcern(w=3, wtimeout=5000))
    every.insert_one({"_id": 1})
    for member in cluster.members:
        assert count_on(member, "wn") == 1, "w: 3 was acknowledged before a member had it"
    cluster.secondaries()[0].kill()
    # A majority still acknowledges w: 2 at once; w: 3 times out with mongod's error and
    # the write stays.
    client.test.get_collection("wn", write_concern=WriteConcern(w=2)).insert_one({"_id": 2})
    started = time.monotonic()
    short = client.test.get_collection("wn", write_concern=WriteConcern(w=3, wtimeout=300))
    with pytest.raises(WriteConcernError) as timed_out:
        short.insert_one({"_id": 3})
    assert 0.3 <= time.monotonic() - started < 5
    assert timed_out.value.code == 64
    assert timed_out.value.details["errInfo"]["wtimeout"] is True
    assert client.test.wn.count_documents({}) == 3


def test_default_read_and_write_concerns(start_replica_set, start_server):
    with start_server().client() as standalone:
        for command in ("getDefaultRWConcern", "setDefaultRWConcern"):
            with pytest.raises(OperationFailure) as refused:
                standalone.admin.command(command, 1)
            assert refused.value.code == 20, command  # IllegalOperation
    cluster = start_replica_set(3)
    client = cluster.client(retryWrites=False)
    implicit = client.admin.command("getDefaultRWConcern")
    assert implicit["defaultWriteConcern"] == {"w": "majority", "wtimeout": 0}
    assert implicit["defaultReadConcern"] == {"level": "local"}
    assert implicit["defaultWriteConcernSource"] == "implicit"
    for arguments, code in [
        ({}, 2),
        ({"defaultReadConcern": {"level": "snapshot"}}, 2),
        ({"defaultReadConcern": {"level": "local", "afterClusterTime": 1}}, 2),
        ({"defaultWriteConcern": {"w": 0}}, 2),
        ({"defaultReadConcern": 1}, 14),
    ]:
        with pytest.raises(OperationFailure) as refused:
            client.admin.command("setDefaultRWConcern", 1, **arguments)
        assert refused.value.code == code, arguments
    reply = client.admin.command(
        "setDefaultRWConcern",
        1,
        defaultWriteConcern={"w": 3, "wtimeout": 300},
        defaultReadConcern={"level": "majority"},
    )
    assert reply["defaultWriteConcern"] == {"w": 3, "wtimeout": 300}
    assert reply["defaultWriteConcernSource"] == "global"
    assert "updateOpTime" in reply
    # The defaults are replicated: a secondary reports them too, and refuses to set them.
    secondary = cluster.secondaries()[0]
    with reader_of(secondary) as reader:
        with pytest.raises(NotPrimaryError) as on_secondary:
            reader.admin.command("setDefaultRWConcern", 1, defaultReadConcern={})
        assert on_secondary.value.details["code"] == 10107
        wait_until(
            lambda: (
                reader.admin.command("getDefaultRWConcern")["defaultReadConcern"]
                == {"level": "majority"}
            ),
            what="the defaults on a secondary",
        )
    # A write without a concern of its own waits for the default w: 3.
    secondary.kill()
    with pytest.raises(WriteConcernError) as timed_out:
        client.test.rw.insert_one({"_id": 1})
    assert timed_out.value.code == 64
    client.admin.command("setDefaultRWConcern", 1, defaultWriteConcern={})
    client.test.rw.insert_one({"_id": 2})
    assert client.admin.command("getDefaultRWConcern")["defaultWriteConcernSource"] == "implicit"


def test_maintenance_mode_makes_a_secondary_recovering(start_replica_set):
    cluster = start_replica_set(3)
    primary = cluster.wait_for_primary()
    cluster.client().test.m.insert_one({"_id": 1})
    with pytest.raises(OperationFailure) as on_primary:
        cluster.direct(primary).admin.command("replSetMaintenance", True)
    assert on_primary.value.code == 95  # NotSecondary
    member = cluster.secondaries()[0]
    with reader_of(member) as reader:
        admin = reader.admin
        with pytest.raises(OperationFailure) as not_bool:
            admin.command("replSetMaintenance", "yes")
        assert not_bool.value.code == 14
        admin.command("replSetMaintenance", True)
        admin.command("replSetMaintenance", True)  # the calls nest
        hello = admin.command("hello")
        assert not hello["secondary"] and not hello["isWritablePrimary"]
        with pytest.raises(NotPrimaryError) as no_reads:
            reader.test.m.find_one()
        assert no_reads.value.details["code"] == 13436  # NotPrimaryOrSecondary
        status = cluster.direct(primary).admin
        wait_until(
            lambda: any(
                m["stateStr"] == "RECOVERING" for m in status.command("replSetGetStatus")["members"]
            ),
            what="the primary seeing the member RECOVERING",
        )
        admin.command("replSetMaintenance", False)
        assert not admin.command("hello")["secondary"], "still in maintenance once"
        admin.command("replSetMaintenance", False)
        assert admin.command("hello")["secondary"]
        assert reader.test.m.find_one() == {"_id": 1}
        with pytest.raises(OperationFailure) as out:
            admin.command("replSetMaintenance", False)
        assert out.value.code == 96  # OperationFailed


def test_tags_write_modes_and_a_delayed_member(start_replica_set):
    cluster = start_replica_set(3)
    primary = cluster.wait_for_primary()
    east, west = [m for m in cluster.members if m is not primary]
    client = cluster.client(retryWrites=False)
    config = client.admin.command("replSetGetConfig")["config"]
    config["version"] += 1
    for member in config["members"]:
        host = member["host"]
        member["tags"] = {"dc": "west" if host.endswith(f":{west.port}") else "east"}
        if host.endswith(f":{west.port}"):
            member.update(priority=0, hidden=True, secondaryDelaySecs=2)
    config["settings"]["getLastErrorModes"] = {"twoDCs": {"dc": 2}}
    client.admin.command("replSetReconfig", config)
    shown = client.admin.command("replSetGetConfig")["config"]
    assert shown["settings"]["getLastErrorModes"] == {"twoDCs": {"dc": 2}}
    assert {m["secondaryDelaySecs"] for m in shown["members"]} == {0, 2}
    with cluster.direct(primary) as direct:
        assert direct.admin.command("hello")["tags"] == {"dc": "east"}
    # A write mode waits for members with two distinct `dc` values; an unknown one is
    # mongod's writeConcernError.
    coll = client.test.get_collection(
        "tagged", write_concern=WriteConcern(w="twoDCs", wtimeout=10_000)
    )
    coll.insert_one({"_id": 1})
    unknown = client.test.get_collection("tagged", write_concern=WriteConcern(w="nowhere"))
    with pytest.raises(WriteConcernError) as no_mode:
        unknown.insert_one({"_id": 2})
    assert no_mode.value.code == 79
    # Read preference tag sets select by the tags hello reports.
    by_tag = client.test.get_collection(
        "tagged", read_preference=Secondary(tag_sets=[{"dc": "east"}])
    )
    cursor = by_tag.find({"_id": 1})
    assert next(cursor)["_id"] == 1
    assert cursor.address[1] == east.port
    # The delayed member holds new writes but applies them two seconds late.
    written = time.monotonic()
    client.test.get_collection("tagged", write_concern=WriteConcern(w=3)).insert_one(
        {"_id": "late"}
    )
    with cluster.direct(west) as delayed:
        assert delayed.test.tagged.count_documents({"_id": "late"}) == 0
        wait_until(lambda: delayed.test.tagged.count_documents({"_id": "late"}) == 1, timeout_s=15)
    assert time.monotonic() - written >= 1.5
    # Without the west member, the mode cannot be satisfied: WriteConcernFailed, the
    # write stays.
    west.kill()
    short = client.test.get_collection(
        "tagged", write_concern=WriteConcern(w="twoDCs", wtimeout=300)
    )
    with pytest.raises(WriteConcernError) as timed_out:
        short.insert_one({"_id": 3})
    assert timed_out.value.code == 64
    assert client.test.tagged.count_documents({"_id": 3}) == 1


def test_drop_connections_reopens_a_members_connections(start_replica_set):
    """dropConnections on the primary closes its connections to a secondary: they are
    opened anew (the secondary counts new connections) and replication goes on."""
    cluster = start_replica_set(3)
    client = cluster.client()
    primary = cluster.wait_for_primary()
    secondary = cluster.secondaries()[0]

    with reader_of(secondary) as reader, primary.client(directConnection=True) as direct:

        def created() -> int:
            return reader.admin.command("serverStatus")["connections"]["totalCreated"]

        client.test.c.insert_one({"before": "drop"})

        def settled() -> int | None:
            # The clients' monitors open their connections in the background: once the
            # count holds still, the members' connections stay open until dropped.
            first = created()
            time.sleep(0.5)
            return first if created() == first else None

        before = wait_until(settled, what="connections to settle")
        host = f"127.0.0.1:{secondary.port}"

        def pool_of(host: str) -> dict:
            stats = direct.admin.command("connPoolStats")
            assert stats["totalCreated"] >= stats["totalInUse"] + stats["totalAvailable"]
            return stats["hosts"][host]

        # connPoolStats: the primary's connections to each other member, as one pool.
        stats = direct.admin.command("connPoolStats")
        others = {f"127.0.0.1:{m.port}" for m in cluster.secondaries()}
        assert set(stats["hosts"]) == others
        assert set(stats["pools"]["NetworkInterfaceTL-Replication"]) >= others
        pool_before = pool_of(host)
        assert pool_before["created"] >= 1
        assert pool_before["inUse"] + pool_before["available"] >= 1
        reply = direct.admin.command("dropConnections", hostAndPort=[host, "noport", None])
        assert reply["ok"] == 1
        client.test.c.insert_one({"after": "drop"})
        wait_until(lambda: created() > before, what="the primary's new connections")
        wait_until(lambda: count_on(secondary) == 2, what="replication after the drop")
        assert pool_of(host)["created"] > pool_before["created"]
        for bad in ([":1"], ["host:"], ["host:0"], ["a:b:1"], [5]):
            with pytest.raises(OperationFailure) as refused:
                direct.admin.command("dropConnections", hostAndPort=bad)
            assert refused.value.code in (9, 14), refused.value.details
        with pytest.raises(OperationFailure) as missing:
            direct.admin.command("dropConnections")
        assert missing.value.code == 40414
