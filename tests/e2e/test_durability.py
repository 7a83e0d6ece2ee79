"""Durability: data survives restarts, and acknowledged writes survive `kill -9`.

A database that loses acknowledged writes is broken whatever else it does. These
tests run a private server (`own_server`), write, stop it gracefully or with SIGKILL
in the middle of a write load, start it again on the same data directory, and check
that everything the server acknowledged is there and the data is still consistent.
"""

from __future__ import annotations

import threading
import time

import pymongo
import pytest
from pymongo.errors import DuplicateKeyError, PyMongoError

from helpers import ids

WRITERS = 2
ACKS_BEFORE_KILL = 3000
WRITE_LOOP_LIMIT_S = 20.0
ID_SPACE = 1_000_000  # each writer numbers its documents from its own multiple of this


def _snapshot(client) -> dict:
    """Every collection of database `d` with its documents, in natural order."""
    db = client["d"]
    return {name: list(db[name].find()) for name in sorted(db.list_collection_names())}


@pytest.mark.parametrize("hard", [False, True], ids=["sigterm", "sigkill"])
def test_data_survives_restart(own_server, hard):
    client = own_server.client()
    db = client["d"]
    db["kept"].insert_many([{"_id": i, "v": i, "text": f"row {i}"} for i in range(1000)])
    db["kept"].update_many({"v": {"$lt": 100}}, {"$set": {"updated": True}})
    db["kept"].delete_many({"v": {"$gte": 900}})
    db["dropped"].insert_one({"x": 1})
    db["dropped"].drop()
    db.create_collection("empty")
    client.admin.command("renameCollection", "d.kept", to="d.renamed")
    before = _snapshot(client)

    own_server.restart(hard=hard)
    client = own_server.client()
    assert _snapshot(client) == before
    assert client["d"].command("validate", "renamed")["valid"] is True

    # Still writable, and the _id index survived: new documents fit after the old ones.
    renamed = client["d"]["renamed"]
    with pytest.raises(DuplicateKeyError):
        renamed.insert_one({"_id": 5})
    renamed.insert_one({"_id": "after restart"})
    assert ids(renamed.find())[-1] == "after restart"
    assert renamed.count_documents({}) == 901


class _Writer(threading.Thread):
    """Inserts numbered documents until the server goes away, recording each ack."""

    def __init__(self, collection, first_id: int):
        super().__init__(daemon=True)
        self.collection = collection
        self.first_id = first_id
        self.next_id = first_id
        self.acknowledged: list[int] = []
        self.stop = threading.Event()

    def run(self) -> None:
        deadline = time.monotonic() + WRITE_LOOP_LIMIT_S
        while not self.stop.is_set() and time.monotonic() < deadline:
            try:
                self.collection.insert_one({"_id": self.next_id, "pad": "d" * 100})
            except PyMongoError:
                return  # the server was killed
            self.acknowledged.append(self.next_id)
            self.next_id += 1


@pytest.mark.slow
@pytest.mark.parametrize("journal", [False, True], ids=["w1", "j-true"])
def test_acknowledged_inserts_survive_kill_9(own_server, journal):
    # Not from own_server.client(): kill() closes those first, and this one must still be
    # writing when the server dies.
    client = pymongo.MongoClient(
        own_server.uri,
        serverSelectionTimeoutMS=2000,
        socketTimeoutMS=5000,
        retryWrites=False,
        journal=journal,
    )
    collection = client["d"]["load"]
    writers = [_Writer(collection, first_id=n * ID_SPACE) for n in range(WRITERS)]
    for writer in writers:
        writer.start()
    deadline = time.monotonic() + WRITE_LOOP_LIMIT_S
    while sum(len(w.acknowledged) for w in writers) < ACKS_BEFORE_KILL:
        assert time.monotonic() < deadline, "the write load made too little progress"
        assert all(w.is_alive() for w in writers), "a writer failed before the kill"
        time.sleep(0.01)

    own_server.kill()  # while the writers are still inserting
    for writer in writers:
        writer.stop.set()
        writer.join(timeout=30)
        assert not writer.is_alive()

    own_server.start()
    client.close()
    stored = set(ids(own_server.client()["d"]["load"].find({}, {"_id": 1})))
    for writer in writers:
        mine = {i for i in stored if writer.first_id <= i < writer.first_id + ID_SPACE}
        acknowledged = set(writer.acknowledged)
        lost = sorted(acknowledged - mine)
        assert not lost, f"{len(lost)} acknowledged inserts lost, e.g. {lost[:10]}"
        # Beyond those, at most the insert that was in flight at the kill may be there.
        assert mine - acknowledged <= {writer.next_id}
    assert own_server.client()["d"].command("validate", "load")["valid"] is True
