"""Large insert batches: past 4 MB of documents, the server writes a batch as storage
tables of its own (ingestion) instead of through the journal and memtables.

The path must be invisible to clients: every index gets its entries, unique indexes
refuse duplicates against stored documents and within the batch, ordered batches stop at
their first error, and a batch cut short by `kill -9` is there whole or not at all, with
the index entries of whatever is there.
"""

from __future__ import annotations

import threading
import time

import pymongo
import pytest
from pymongo.errors import BulkWriteError, PyMongoError

PAD = "x" * 1000
BATCH = 6000  # ~6 MB of documents: past the ingestion threshold
ACKS_WAIT_LIMIT_S = 60.0


def _docs(first: int, count: int) -> list[dict]:
    return [{"_id": i, "k": i % 97, "u": i, "pad": PAD} for i in range(first, first + count)]


def _indexed(coll) -> None:
    coll.create_index("k")
    coll.create_index("u", unique=True)


def test_a_large_batch_fills_every_index(coll):
    _indexed(coll)
    assert len(coll.insert_many(_docs(0, BATCH)).inserted_ids) == BATCH
    assert coll.count_documents({}) == BATCH
    assert coll.count_documents({"k": 5}, hint="k_1") == len(range(5, BATCH, 97))
    assert coll.find_one({"u": 4321}, hint="u_1")["_id"] == 4321
    assert coll.find_one({"_id": BATCH - 1})["u"] == BATCH - 1
    assert coll.database.command("validate", coll.name)["valid"] is True


def test_unordered_large_batch_reports_each_duplicate(coll):
    _indexed(coll)
    coll.insert_many(_docs(0, BATCH))
    batch = _docs(BATCH, BATCH)
    batch[10]["u"] = 3  # taken by a stored document
    batch[20]["_id"] = BATCH  # taken by the batch's first document
    with pytest.raises(BulkWriteError) as raised:
        coll.insert_many(batch, ordered=False)
    details = raised.value.details
    assert details["nInserted"] == BATCH - 2
    assert [(e["index"], e["code"]) for e in details["writeErrors"]] == [(10, 11000), (20, 11000)]
    assert coll.count_documents({}) == 2 * BATCH - 2
    assert coll.count_documents({"u": 3}, hint="u_1") == 1
    assert coll.database.command("validate", coll.name)["valid"] is True


def test_ordered_large_batch_stops_at_its_first_duplicate(coll):
    _indexed(coll)
    batch = _docs(0, BATCH)
    batch[5000]["u"] = 7  # the first 5000 documents (~5 MB) are ingested
    with pytest.raises(BulkWriteError) as raised:
        coll.insert_many(batch)
    details = raised.value.details
    assert details["nInserted"] == 5000
    assert [e["index"] for e in details["writeErrors"]] == [5000]
    assert coll.count_documents({}) == 5000
    assert coll.find_one({"_id": 4999}, hint="_id_") is not None
    assert coll.database.command("validate", coll.name)["valid"] is True


def test_large_batches_after_small_ones_and_before_deletes(coll):
    _indexed(coll)
    coll.insert_many(_docs(0, 10))
    coll.insert_many(_docs(10, BATCH))
    coll.insert_one({"_id": "last", "k": -1, "u": -1})
    assert coll.delete_many({"k": 5}).deleted_count == len(range(5, BATCH + 10, 97))
    assert coll.count_documents({"k": 5}, hint="k_1") == 0
    assert [d["_id"] for d in coll.find({}, {"_id": 1}).sort("$natural", -1).limit(2)] == [
        "last",
        BATCH + 9,
    ]
    assert coll.database.command("validate", coll.name)["valid"] is True


class _BatchWriter(threading.Thread):
    """Inserts large numbered batches until the server goes away, recording each ack."""

    def __init__(self, collection):
        super().__init__(daemon=True)
        self.collection = collection
        self.acknowledged: list[int] = []
        self.attempted = 0

    def run(self) -> None:
        while True:
            first = self.attempted * BATCH
            self.attempted += 1
            try:
                self.collection.insert_many(_docs(first, BATCH))
            except PyMongoError:
                return  # the server was killed
            self.acknowledged.append(first)


@pytest.mark.slow
def test_a_large_batch_cut_by_kill_9_is_whole_or_absent(own_server):
    _indexed(own_server.client()["d"]["bulk"])
    client = pymongo.MongoClient(own_server.uri, serverSelectionTimeoutMS=2000, retryWrites=False)
    writer = _BatchWriter(client["d"]["bulk"])
    writer.start()
    deadline = time.monotonic() + ACKS_WAIT_LIMIT_S
    while len(writer.acknowledged) < 3:
        assert time.monotonic() < deadline, "the batches made too little progress"
        assert writer.is_alive(), "the writer failed before the kill"
        writer.join(timeout=0.01)
    own_server.kill()  # while the writer is in its next batch
    writer.join(timeout=30)
    client.close()

    own_server.start()
    coll = own_server.client()["d"]["bulk"]
    stored = coll.count_documents({})
    assert stored % BATCH == 0, f"{stored} documents: a batch is there in part"
    assert stored >= len(writer.acknowledged) * BATCH
    assert stored <= writer.attempted * BATCH
    for first in range(0, stored, BATCH):
        assert coll.find_one({"u": first + BATCH - 1}, hint="u_1") is not None
    assert coll.count_documents({"k": 0}, hint="k_1") == len(range(0, stored, 97))
    assert coll.database.command("validate", "bulk")["valid"] is True
