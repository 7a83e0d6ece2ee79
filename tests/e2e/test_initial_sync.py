"""The oplog's bound and initial sync: a member's log is trimmed to `--oplogSizeMB`
once a copy of its data holds the oldest entries, a member added by reconfig starts
from such a copy (not from the whole history), a member that was away longer than the
log reaches back syncs from a copy on its own, and `replSetResizeOplog` checks its input
as mongod does.

Each test starts its own members on 127.0.0.1 (the `start_replica_set` fixture).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pymongo import ASCENDING
from pymongo.errors import OperationFailure

from helpers import count_on, reader_of, wait_until

BATCHES = 30
PER_BATCH = 1000
# Each insert of a batch is one log entry of about 130 kB: 30 of them are 4 MB, four
# times a 1 MB oplog.
SMALL_OPLOG = ["--oplogSizeMB", "1"]


def copies(member) -> list[str]:
    """The copies of the data this member holds (files of its dbpath)."""
    directory = Path(member.dbpath) / "replication-snapshots"
    if not directory.exists():
        return []
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("snapshot-"))


def newest_oplog_ts(client):
    return next(client.local.oplog.rs.find().sort("$natural", -1).limit(1))["ts"]


def oldest_oplog_ts(client):
    return next(client.local.oplog.rs.find().sort("$natural", 1).limit(1))["ts"]


def fill(collection, start: int = 0) -> None:
    for batch in range(BATCHES):
        base = start + batch * PER_BATCH
        collection.insert_many([{"i": base + i, "pad": "x" * 100} for i in range(PER_BATCH)])


def test_a_new_member_syncs_from_a_copy_after_the_oplog_was_trimmed(
    start_replica_set, basalt_binary
):
    cluster = start_replica_set(3, extra_args=SMALL_OPLOG)
    client = cluster.client()
    collection = client.test.c
    collection.create_index([("i", ASCENDING)], unique=True)
    fill(collection)
    primary = cluster.wait_for_primary()
    wait_until(lambda: copies(primary), what="a copy taken to trim the oplog")

    fourth = cluster.add_member(basalt_binary)
    config = client.admin.command("replSetGetConfig")["config"]
    config["version"] += 1
    config["members"].append({"_id": 3, "host": f"127.0.0.1:{fourth.port}", "priority": 0})
    client.admin.command("replSetReconfig", config)
    total = BATCHES * PER_BATCH
    wait_until(lambda: count_on(fourth) == total, what="the new member's copy")
    assert copies(fourth), "the new member did not start from a copy"
    with reader_of(fourth) as reader:
        indexes = reader.test.c.index_information()
        assert indexes["i_1"]["unique"] is True
        # The copy's index answers queries on the new member.
        assert reader.test.c.find_one({"i": total - 1}, {"_id": 0, "i": 1}) == {"i": total - 1}

    # Writes after the copy reach the new member through the log.
    collection.insert_one({"i": -1})
    wait_until(lambda: count_on(fourth) == total + 1, what="a write after the copy")
    # The copy and what followed it survive a restart of the new member.
    fourth.restart(hard=True)
    wait_until(lambda: count_on(fourth) == total + 1, what="the new member after a restart")


def test_a_member_away_longer_than_the_oplog_syncs_from_a_copy(start_replica_set):
    cluster = start_replica_set(3, extra_args=SMALL_OPLOG)
    client = cluster.client()
    collection = client.test.c
    collection.insert_one({"i": -1})
    away = cluster.secondaries()[0]
    wait_until(lambda: count_on(away) == 1, what="the first write on every member")
    with reader_of(away) as reader:
        last_seen = newest_oplog_ts(reader)
    away.kill()
    # While it is away: documents deleted, a collection dropped, others written, and
    # the log trimmed past everything it has.
    client.test.dropped.insert_one({"x": 1})
    client.test.dropped.drop()
    collection.delete_one({"i": -1})
    fill(collection)
    primary = cluster.wait_for_primary()
    wait_until(lambda: copies(primary), what="a copy taken to trim the oplog")
    # The copy comes first, the purge of the log after it: only once the primary no
    # longer holds what the member last saw must the member sync from the copy.
    with reader_of(primary) as reader:
        wait_until(
            lambda: oldest_oplog_ts(reader) > last_seen,
            what="the primary's oplog trimmed past the member that is away",
        )
    away.start()
    total = BATCHES * PER_BATCH
    wait_until(lambda: count_on(away) == total, what="the returning member's copy")
    assert copies(away), "the returning member did not sync from a copy"
    with reader_of(away) as reader:
        assert reader.test.c.count_documents({"i": -1}) == 0
        assert "dropped" not in reader.test.list_collection_names()
    collection.insert_one({"i": -2})
    wait_until(lambda: count_on(away) == total + 1, what="a write after the copy")


def test_resize_oplog_checks_its_input(start_replica_set, start_server):
    cluster = start_replica_set(1)
    admin = cluster.client().admin
    assert admin.command("replSetResizeOplog", 1, size=990.0)["ok"] == 1.0
    cases = [
        ({"size": 10.0}, 72),  # below mongod's 990 MB
        ({"size": 2.0e9}, 72),  # above 1 PB
        ({"size": "big"}, 14),
        ({}, 72),
        ({"size": 1000.0, "minRetentionHours": 2}, 72),
    ]
    for arguments, code in cases:
        with pytest.raises(OperationFailure) as refused:
            admin.command("replSetResizeOplog", 1, **arguments)
        assert refused.value.code == code, arguments
    with start_server().client() as standalone, pytest.raises(OperationFailure) as refused:
        standalone.admin.command("replSetResizeOplog", 1, size=990.0)
    assert refused.value.code == 76
    uninitiated = start_server("--replSet", "later").client(directConnection=True)
    with uninitiated, pytest.raises(OperationFailure) as not_yet:
        uninitiated.admin.command("replSetResizeOplog", 1, size=990.0)
    assert not_yet.value.code == 94  # NotYetInitialized
