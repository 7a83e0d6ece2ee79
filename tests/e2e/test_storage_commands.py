"""The storage maintenance commands: `fsync` (and its lock, which holds writes back
until `fsyncUnlock`), `compact`, `autoCompact` and `dataSize`, with mongod's replies and
errors.
"""

from __future__ import annotations

import threading
import time

import bson
import pytest

from helpers import raises_code


@pytest.fixture
def admin(client, db):
    """The admin database; set up after `db`, so that its lock is gone before `db`
    is dropped."""
    yield client.admin
    # Never leave the shared server locked.
    while True:
        try:
            client.admin.command("fsyncUnlock")
        except Exception:  # noqa: BLE001 - not locked any more
            break


def test_fsync_flushes_and_reports_one_file(admin):
    reply = admin.command("fsync")
    assert reply["numFiles"] == 1
    assert "lockCount" not in reply


def test_fsync_lock_holds_writes_back_until_unlocked(admin, server, db):
    db.c.insert_one({"_id": 0})
    locked = admin.command("fsync", lock=True)
    assert locked["lockCount"] == bson.Int64(1)
    assert locked["info"] == "now locked against writes, use db.fsyncUnlock() to unlock"
    assert admin.command("fsync", lock=True)["lockCount"] == 2
    # Reads go on; a write from another client waits.
    assert db.c.count_documents({}) == 1
    other = server.client()
    done = threading.Event()

    def write():
        other[db.name].c.insert_one({"_id": 1})
        done.set()

    writer = threading.Thread(target=write)
    writer.start()
    time.sleep(0.5)
    assert not done.is_set()
    # lockInfo shows the global lock: held shared twice, the write waiting.
    [entry] = admin.command("lockInfo")["lockInfo"]
    assert [g["mode"] for g in entry["granted"]] == ["S", "S"]
    assert [p["mode"] for p in entry["pending"]] == ["IX"]
    assert admin.command("fsyncUnlock")["lockCount"] == 1
    time.sleep(0.3)
    assert not done.is_set()
    reply = admin.command("fsyncUnlock")
    assert reply == {"info": "fsyncUnlock completed", "lockCount": 0, "ok": 1.0}
    writer.join(timeout=10)
    assert done.is_set()
    assert db.c.count_documents({}) == 2
    assert admin.command("lockInfo")["lockInfo"] == []
    with raises_code("Unauthorized"):
        db.command("lockInfo")
    with raises_code("Location40415"):
        admin.command("lockInfo", 1, bogus=1)


def test_a_waiting_write_stops_at_its_time_limit(admin, db):
    admin.command("fsync", lock=True)
    with raises_code("MaxTimeMSExpired"):
        db.command("insert", "c", documents=[{"x": 1}], maxTimeMS=300)
    admin.command("fsyncUnlock")


def test_fsync_errors(admin, db):
    with raises_code("IllegalOperation"):
        admin.command("fsyncUnlock")
    with raises_code("Unauthorized"):
        db.command("fsync")
    with raises_code("TypeMismatch"):
        admin.command("fsync", lock="yes")
    with raises_code("InvalidOptions"):
        admin.command("fsync", writeConcern={"w": 1})


def test_compact(db):
    db.c.insert_one({"x": 1})
    assert db.command("compact", "c") == {"bytesFreed": 0, "ok": 1.0}
    assert db.command("compact", "c", dryRun=True) == {"estimatedBytesFreed": 0, "ok": 1.0}
    with raises_code("NamespaceNotFound"):
        db.command("compact", "missing")
    with raises_code("BadValue"):
        db.command("compact", "c", freeSpaceTargetMB=0)
    db.command("create", "v", viewOn="c", pipeline=[])
    with raises_code("CommandNotSupportedOnView"):
        db.command("compact", "v")


def test_auto_compact_keeps_one_setting(admin):
    assert admin.command("autoCompact", True, freeSpaceTargetMB=20)["ok"] == 1.0
    assert admin.command("autoCompact", True, freeSpaceTargetMB=20)["ok"] == 1.0
    with raises_code("AlreadyInitialized"):
        admin.command("autoCompact", True, freeSpaceTargetMB=30)
    assert admin.command("autoCompact", False)["ok"] == 1.0


def test_data_size_sums_the_documents(db):
    docs = [{"_id": i, "x": i, "pad": "p" * 100} for i in range(20)]
    db.c.insert_many(docs)
    whole = db.command("dataSize", f"{db.name}.c")
    assert whole["numObjects"] == bson.Int64(20)
    assert whole["size"] == sum(len(bson.encode(d)) for d in docs)
    db.c.create_index("x")
    ranged = db.command(
        "dataSize", f"{db.name}.c", keyPattern={"x": 1}, min={"x": 5}, max={"x": 10}
    )
    assert ranged["numObjects"] == 5
    assert db.command("dataSize", f"{db.name}.missing")["numObjects"] == 0
    with raises_code("InvalidNamespace"):
        db.command("dataSize", "nodot")
    with raises_code("OperationFailed"):
        db.command("dataSize", f"{db.name}.c", min={"x": 1}, max={"x": 2})
