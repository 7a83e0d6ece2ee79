"""Faults of the machine: a full disk, a data directory that turns read-only, a table
file with flipped bytes. The server reports each with MongoDB's error, refuses the
writes it cannot store, goes on serving reads, and loses no acknowledged write.

The disks are real: a small tmpfs that fills up, an ext4 image on a loop device whose
file system turns read-only as on a disk error (`errors=remount-ro`, set off through
ext4's sysfs `trigger_fs_error`), a read-only bind mount. Mounting needs root; without
it the mounts and the server go into a user and mount namespace of the test's own
(`unshare`), and a test that needs what such a namespace cannot give (a loop device)
is skipped saying so.

Why no bind mount remounted read-only under a running server: Linux refuses that
(`mount -o remount,bind,ro` fails with EBUSY) while a file under the mount is open for
writing, and the server always holds its journal open. A file system that goes
read-only on an error is what a failing disk does to a server, and it fails every
write, through open files too.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import time
from pathlib import Path

import pymongo
import pytest
from pymongo import WriteConcern
from pymongo.errors import BulkWriteError, OperationFailure, WriteError

from basalt_server import BasaltServer, free_port
from helpers import CODES, ids, raises_code

DISK_SIZE_MB = 24
BALLAST_BYTES = 4 << 20
# About 5 MB a batch: past the server's 4 MB threshold, so it is written as tables.
BULK_DOCUMENTS = 5000
BULK_PAD = "b" * 1000
SMALL_BATCH_DOCUMENTS = 200
FILL_LIMIT_S = 120.0
FILL_BATCHES_MAX = 2000
READ_ONLY_DISK_SIZE_MB = 64
ACKNOWLEDGED_BEFORE_READ_ONLY = 500
COMMAND_TIMEOUT_S = 60
NAMESPACE_READY_TIMEOUT_S = 5.0


class Mounts:
    """Mounts for one test: made directly as root, else inside a user and mount
    namespace that a `sleep` holds open (the server then runs in it too, through
    `prefix`). Whatever was mounted is undone, in reverse order, by `close`."""

    def __init__(self, holder: subprocess.Popen | None = None):
        self.holder = holder
        self.prefix: list[str] = []
        if holder is not None:
            self.prefix = [
                "nsenter", "--target", str(holder.pid), "--user", "--mount",
                "--preserve-credentials",
            ]  # fmt: skip
        self._undo: list[list[str]] = []

    @classmethod
    def open(cls, scratch: Path) -> Mounts:
        scratch.mkdir(exist_ok=True)
        if os.geteuid() == 0 and _succeeds(
            ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", scratch]
        ):
            _succeeds(["umount", scratch])
            return cls()
        if shutil.which("unshare") is None or shutil.which("nsenter") is None:
            pytest.skip("mounting needs root, and unshare/nsenter are not installed")
        holder = subprocess.Popen(
            ["unshare", "--user", "--map-root-user", "--mount", "--propagation", "private",
             "sleep", "3600"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        mounts = cls(holder)
        deadline = time.monotonic() + NAMESPACE_READY_TIMEOUT_S
        own = os.readlink("/proc/self/ns/mnt")
        while time.monotonic() < deadline and holder.poll() is None:
            try:
                if os.readlink(f"/proc/{holder.pid}/ns/mnt") != own:
                    break
            except OSError:
                pass
            time.sleep(0.05)
        probe = [*mounts.prefix, "mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", scratch]
        if holder.poll() is not None or not _succeeds(probe):
            mounts.close()
            pytest.skip("mounting needs root, and no user namespace could be made here")
        _succeeds([*mounts.prefix, "umount", scratch])
        return mounts

    @property
    def namespaced(self) -> bool:
        return self.holder is not None

    def run(self, *command) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*self.prefix, *map(str, command)],
            check=True, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S,
        )  # fmt: skip

    def mount(self, *arguments, target: Path) -> None:
        self.run("mount", *arguments, target)
        self._undo.append(["umount", str(target)])

    def unmount(self, target: Path) -> None:
        self.run("umount", target)
        self._undo.remove(["umount", str(target)])

    def on_close(self, command: list[str]) -> None:
        self._undo.append(command)

    def view(self, path: Path) -> Path:
        """`path` as this process sees it (through the namespace's root when there is one)."""
        return Path(f"/proc/{self.holder.pid}/root{path}") if self.namespaced else path

    def close(self) -> None:
        for command in reversed(self._undo):
            if not _succeeds([*self.prefix, *command]) and command[0] == "umount":
                _succeeds([*self.prefix, "umount", "-l", command[1]])
        self._undo.clear()
        if self.holder is not None:
            self.holder.kill()
            self.holder.wait()


def _succeeds(command: list) -> bool:
    try:
        done = subprocess.run(
            [str(part) for part in command], capture_output=True, timeout=COMMAND_TIMEOUT_S
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


@pytest.fixture
def mounts(tmp_path):
    opened = Mounts.open(tmp_path / "mount-probe")
    yield opened
    opened.close()


@pytest.fixture
def start_in_mounts(basalt_binary, tmp_path, mounts):
    """Starts servers (in the mounts' namespace, if any) that are killed before the
    mounts are undone, and must not have panicked."""
    started: list[BasaltServer] = []

    def start(dbpath: Path) -> BasaltServer:
        server = BasaltServer(
            basalt_binary, dbpath, tmp_path / "basalt.log", launcher=mounts.prefix
        )
        started.append(server)
        return server.start()

    yield start
    panics = [line for server in started for line in server.panics()]
    for server in started:
        server.kill()
    assert not panics, "basalt panicked:\n" + "\n".join(panics)


def _write_error(error: OperationFailure) -> dict:
    """The first entry of `writeErrors` of a failed insert."""
    assert isinstance(error, (WriteError, BulkWriteError)), error.details
    details = error.details
    return details["writeErrors"][0] if isinstance(error, BulkWriteError) else details


def _fill(collection, make_batch, acknowledged: set, attempted: set) -> dict:
    """Inserts batches until one fails; returns its write error. Bounded in batches and
    time: a disk that never fills fails the test."""
    deadline = time.monotonic() + FILL_LIMIT_S
    for _ in range(FILL_BATCHES_MAX):
        assert time.monotonic() < deadline, "the disk did not fill in time"
        batch = make_batch(len(attempted))
        attempted.update(doc["_id"] for doc in batch)
        try:
            collection.insert_many(batch)
        except (WriteError, BulkWriteError) as error:
            return _write_error(error)
        acknowledged.update(doc["_id"] for doc in batch)
    pytest.fail(f"the disk did not fill in {FILL_BATCHES_MAX} batches")


def _assert_refused(write, code_name: str) -> str:
    with pytest.raises((WriteError, BulkWriteError)) as info:
        write()
    entry = _write_error(info.value)
    assert entry["code"] == CODES[code_name], entry
    return entry["errmsg"]


def test_a_full_disk_fails_writes_with_out_of_disk_space_and_loses_nothing(
    mounts, start_in_mounts, tmp_path
):
    disk = tmp_path / "disk"
    disk.mkdir()
    mounts.mount("-t", "tmpfs", "-o", f"size={DISK_SIZE_MB}m", "tmpfs", target=disk)
    ballast = mounts.view(disk / "ballast")
    ballast.write_bytes(bytes(BALLAST_BYTES))
    server = start_in_mounts(disk / "data")
    collection = server.client(retryWrites=False)["d"]["c"]
    acknowledged: set[int] = set()
    attempted: set[int] = set()

    # Bulk loads, whose batches the server writes as tables of their own...
    first = _fill(
        collection,
        lambda n: [{"_id": n + i, "pad": BULK_PAD} for i in range(BULK_DOCUMENTS)],
        acknowledged,
        attempted,
    )
    assert first["code"] == CODES["OutOfDiskSpace"], first
    assert "the disk is full" in first["errmsg"]
    # ...then small batches, which go through the journal, until it is full too.
    small = _fill(
        collection,
        lambda n: [{"_id": n + i, "pad": BULK_PAD} for i in range(SMALL_BATCH_DOCUMENTS)],
        acknowledged,
        attempted,
    )
    assert small["code"] == CODES["OutOfDiskSpace"], small
    assert "writes are refused" in small["errmsg"], small
    assert acknowledged, "some writes fitted before the disk was full"
    message = _assert_refused(lambda: collection.insert_one({"_id": "later"}), "OutOfDiskSpace")
    assert "the disk is full" in message

    # Reads go on, on this connection and on new ones, and see every acknowledged write.
    stored = set(ids(collection.find({}, {"_id": 1})))
    assert acknowledged <= stored <= attempted
    assert collection.count_documents({}) == len(stored)
    with pymongo.MongoClient(server.uri, serverSelectionTimeoutMS=5000) as other:
        assert other.admin.command("ping")["ok"] == 1
        assert other["d"]["c"].find_one({"_id": min(acknowledged)}) is not None
    assert server.is_alive()

    # With room again, a restarted server has every acknowledged write and takes more.
    server.stop()
    ballast.unlink()
    server.start()
    collection = server.client()["d"]["c"]
    restored = set(ids(collection.find({}, {"_id": 1})))
    lost = acknowledged - restored
    assert not lost, f"{len(lost)} acknowledged inserts lost, e.g. {sorted(lost)[:10]}"
    assert restored <= attempted
    assert collection.database.command("validate", "c")["valid"] is True
    collection.insert_one({"_id": "after restart"})


def test_a_disk_turned_read_only_fails_writes_with_illegal_operation(
    mounts, start_in_mounts, tmp_path
):
    if mounts.namespaced:
        pytest.skip("a loop device needs root, which a user namespace does not give")
    tools = ["losetup", "mkfs.ext4", "e2fsck"]
    if not Path("/sys/fs/ext4").is_dir() or not all(shutil.which(t) for t in tools):
        pytest.skip("needs ext4 with its sysfs directory, and losetup, mkfs.ext4, e2fsck")
    image = tmp_path / "disk.img"
    with open(image, "wb") as file:
        file.truncate(READ_ONLY_DISK_SIZE_MB << 20)
    mounts.run("mkfs.ext4", "-q", "-F", image)
    device = mounts.run("losetup", "-f", "--show", image).stdout.strip()
    mounts.on_close(["losetup", "-d", device])
    disk = tmp_path / "disk"
    disk.mkdir()
    mounts.mount("-o", "errors=remount-ro", device, target=disk)
    server = start_in_mounts(disk / "data")
    client = server.client(retryWrites=False)
    # Synced writes: a file system that went read-only writes no more dirty pages back.
    collection = client["d"].get_collection("c", write_concern=WriteConcern(j=True))
    collection.insert_many([{"_id": i} for i in range(ACKNOWLEDGED_BEFORE_READ_ONLY)])

    trigger = Path("/sys/fs/ext4") / Path(device).name / "trigger_fs_error"
    trigger.write_text("basalt fault test\n")
    message = _assert_refused(lambda: collection.insert_one({"_id": "x"}), "IllegalOperation")
    assert "read-only" in message and "writes are refused" in message
    _assert_refused(lambda: collection.insert_one({"_id": "y"}), "IllegalOperation")
    bulk = [{"_id": f"bulk {i}", "pad": BULK_PAD} for i in range(BULK_DOCUMENTS)]
    _assert_refused(lambda: collection.insert_many(bulk), "IllegalOperation")
    # Unordered, every document of a batch that could not be stored has its error.
    with pytest.raises(BulkWriteError) as info:
        collection.insert_many([{"_id": f"u{i}"} for i in range(3)], ordered=False)
    errors = info.value.details["writeErrors"]
    assert [e["index"] for e in errors] == [0, 1, 2], errors
    assert {e["code"] for e in errors} == {CODES["IllegalOperation"]}

    expected = list(range(ACKNOWLEDGED_BEFORE_READ_ONLY))
    assert ids(collection.find()) == expected
    assert collection.count_documents({"_id": {"$lt": 10}}) == 10
    with pymongo.MongoClient(server.uri, serverSelectionTimeoutMS=5000) as other:
        assert other["d"]["c"].find_one({"_id": 0}) == {"_id": 0}
    assert server.is_alive()

    # Repaired and mounted again, the disk has every acknowledged write.
    server.stop()
    mounts.unmount(disk)
    repaired = subprocess.run(
        ["e2fsck", "-fy", device], capture_output=True, timeout=COMMAND_TIMEOUT_S
    )
    assert repaired.returncode in (0, 1), repaired.stdout  # 1: errors corrected
    mounts.mount(device, target=disk)
    server.start()
    collection = server.client()["d"]["c"]
    assert ids(collection.find()) == expected
    collection.insert_one({"_id": "after repair"})


@pytest.mark.parametrize("with_data", [False, True], ids=["empty", "with-data"])
def test_a_read_only_data_directory_stops_the_start_with_a_clear_error(
    mounts, basalt_binary, tmp_path, with_data
):
    dbpath = tmp_path / "data"
    dbpath.mkdir()
    if with_data:
        first = BasaltServer(basalt_binary, dbpath, tmp_path / "basalt.log").start()
        try:
            first.client()["d"]["c"].insert_one({"_id": 1})
        finally:
            first.stop()
    mounts.mount("--bind", dbpath, target=dbpath)
    mounts.run("mount", "-o", "remount,bind,ro", dbpath)
    argv = [str(basalt_binary), "--port", str(free_port()), "--bind_ip", "127.0.0.1",
            "--dbpath", str(dbpath)]  # fmt: skip
    result = subprocess.run(
        [*mounts.prefix, *argv], capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S
    )
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "IllegalOperation" in output and "read-only" in output, output
    assert "panicked" not in output, output


CORRUPT_BATCH_DOCUMENTS = 20_000
CORRUPT_PAD_BYTES = 140  # as 280 hex digits: about 6 MB a batch, written as tables
FLIPPED_BYTES = 16


def test_a_corrupt_table_file_is_reported_not_served(own_server):
    # Pads that do not compress away keep the documents' tables the largest files.
    pads = random.Random(7)
    client = own_server.client()
    big = client["d"]["big"]
    big.create_index("k")
    for batch in range(2):
        first_id = batch * CORRUPT_BATCH_DOCUMENTS
        big.insert_many(
            [{"_id": first_id + i, "k": i % 100, "pad": pads.randbytes(CORRUPT_PAD_BYTES).hex()}
             for i in range(CORRUPT_BATCH_DOCUMENTS)]
        )  # fmt: skip
    other = client["d"]["other"]
    other.insert_many([{"_id": i} for i in range(100)])
    own_server.stop()

    tables = list(own_server.dbpath.glob("keyspaces/*/tables/*"))
    largest = max(tables, key=lambda path: path.stat().st_size)
    data = bytearray(largest.read_bytes())
    middle = len(data) // 2
    for i in range(middle, middle + FLIPPED_BYTES):
        data[i] ^= 0xFF
    largest.write_bytes(bytes(data))
    own_server.start()
    client = own_server.client()
    big = client["d"]["big"]
    other = client["d"]["other"]

    with raises_code("DataCorruptionDetected") as info:
        list(big.find())
    assert "corrupt" in str(info.value)
    with raises_code("DataCorruptionDetected"):
        list(big.aggregate([{"$group": {"_id": "$k", "n": {"$sum": 1}}}]))
    result = client["d"].command("validate", "big", full=True)
    assert result["valid"] is False
    assert result["errors"][0] == "Detected one or more invalid documents. See logs."
    assert result["nInvalidDocuments"] == len(result["corruptRecords"]) > 0
    assert result["nrecords"] + result["nInvalidDocuments"] == 2 * CORRUPT_BATCH_DOCUMENTS
    assert result["advice"].startswith("A corrupt namespace has been detected.")

    # Blocks that are intact, and other collections, are still served and written.
    assert big.find_one({"_id": 0})["k"] == 0
    assert big.find_one({"_id": 2 * CORRUPT_BATCH_DOCUMENTS - 1}) is not None
    assert ids(other.find()) == list(range(100))
    other.insert_one({"_id": "new"})
    assert client["d"].command("validate", "other")["valid"] is True
    assert own_server.is_alive()
