"""Cursors: first batch of 101, getMore until exhausted, limits, killCursors.

Results larger than one batch reach every driver through find/aggregate → getMore
→ killCursors; a lost or repeated document, a cursor id that outlives its kill or a
wrong batch size shows up as missing data or leaked server memory in applications.
"""

from __future__ import annotations

import time

import pytest
from pymongo import DESCENDING

from helpers import ids, raises_code

N_DOCS = 10_000


@pytest.fixture(scope="module")
def big(client):
    """One collection of 10 000 documents, shared by this module's read-only tests."""
    coll = client["cursors"]["big"]
    coll.drop()
    coll.insert_many([{"_id": i, "pad": "p" * 20} for i in range(N_DOCS)])
    yield coll
    client.drop_database("cursors")


def _drain(db, command: str, reply: dict, collection: str, **getmore) -> tuple[list, list[int]]:
    """All documents of a cursor reply plus its getMores, and each batch's size."""
    cursor = reply["cursor"]
    docs, sizes = list(cursor["firstBatch"]), [len(cursor["firstBatch"])]
    while cursor["id"] != 0:
        cursor = db.command("getMore", cursor["id"], collection=collection, **getmore)["cursor"]
        docs += cursor["nextBatch"]
        sizes.append(len(cursor["nextBatch"]))
        assert len(sizes) < N_DOCS, f"{command} cursor never ends"
    return docs, sizes


@pytest.mark.slow
@pytest.mark.parametrize(
    "command, args",
    [
        ("find", {}),
        ("aggregate", {"pipeline": [], "cursor": {}}),
    ],
)
def test_default_first_batch_is_101_then_get_more(big, command, args):
    db = big.database
    reply = db.command(command, big.name, **args)
    docs, sizes = _drain(db, command, reply, big.name)
    assert sizes[0] == 101
    assert len(sizes) >= 2
    assert ids(docs) == list(range(N_DOCS))  # natural order is insertion order


@pytest.mark.slow
def test_get_more_batch_size(big):
    db = big.database
    reply = db.command("find", big.name, batchSize=1000)
    # 3001 leaves a short last batch, so the server sees the end of the data.
    docs, sizes = _drain(db, "find", reply, big.name, batchSize=3001)
    assert sizes == [1000, 3001, 3001, 2998]
    assert ids(docs) == list(range(N_DOCS))


@pytest.mark.slow
def test_driver_iterates_sorted_cursor(big):
    assert ids(big.find({}, {"pad": 0}).sort("_id", DESCENDING)) == list(range(N_DOCS))[::-1]
    assert len(list(big.find().batch_size(500))) == N_DOCS


def test_limit_spanning_batches(big):
    docs = list(big.find().limit(150))
    assert ids(docs) == list(range(150))


def test_kill_cursors(big):
    db = big.database
    cursor_id = db.command("find", big.name, batchSize=2)["cursor"]["id"]
    assert cursor_id != 0
    reply = db.command("killCursors", big.name, cursors=[cursor_id])
    assert reply["cursorsKilled"] == [cursor_id]
    assert reply["cursorsNotFound"] == []
    with raises_code("CursorNotFound"):
        db.command("getMore", cursor_id, collection=big.name)


def test_kill_unknown_cursor(big):
    reply = big.database.command("killCursors", big.name, cursors=[123456789])
    assert reply["cursorsNotFound"] == [123456789]
    assert reply["cursorsKilled"] == []


def test_get_more_unknown_cursor(big):
    with raises_code("CursorNotFound"):
        big.database.command("getMore", 987654321, collection=big.name)


def test_exhausted_cursor_is_closed(big):
    reply = big.database.command("find", big.name, filter={"_id": {"$lt": 5}})
    assert reply["cursor"]["id"] == 0
    assert ids(reply["cursor"]["firstBatch"]) == list(range(5))


def test_aggregation_results_stream_and_a_late_error_comes_with_a_get_more(db):
    """A one-pass pipeline's results are computed as the client reads them (as in
    MongoDB): the first batches arrive, and an error in a later document fails the
    getMore that reaches it, not the aggregate command."""
    coll = db["stream"]
    coll.insert_many([{"_id": i, "d": 0 if i == 700 else 2} for i in range(1000)])
    pipeline = [{"$project": {"q": {"$divide": [1, "$d"]}}}]
    reply = db.command("aggregate", "stream", pipeline=pipeline, cursor={"batchSize": 100})
    cursor = reply["cursor"]
    seen = ids(cursor["firstBatch"])
    assert seen == list(range(100)) and cursor["id"] != 0
    with raises_code("BadValue"):
        while cursor["id"] != 0:
            cursor = db.command("getMore", cursor["id"], collection="stream", batchSize=100)
            cursor = cursor["cursor"]
            seen += ids(cursor["nextBatch"])
    assert seen == list(range(700))
    # The whole pipeline fails as one command when the error is in the first batch.
    with raises_code("BadValue"):
        db.command("aggregate", "stream", pipeline=[{"$skip": 650}, *pipeline], cursor={})


def test_killing_a_streaming_aggregation_cursor(big):
    db = big.database
    pipeline = [{"$project": {"pad": 0}}, {"$addFields": {"twice": {"$multiply": ["$_id", 2]}}}]
    reply = db.command("aggregate", big.name, pipeline=pipeline, cursor={"batchSize": 3})
    cursor_id = reply["cursor"]["id"]
    assert [d["twice"] for d in reply["cursor"]["firstBatch"]] == [0, 2, 4]
    assert db.command("killCursors", big.name, cursors=[cursor_id])["cursorsKilled"] == [cursor_id]
    with raises_code("CursorNotFound"):
        db.command("getMore", cursor_id, collection=big.name)
    streamed = big.aggregate(pipeline, batchSize=700)
    assert [d["twice"] for d in streamed] == [2 * i for i in range(N_DOCS)]


@pytest.mark.parametrize("command", ["find", "aggregate"])
def test_max_time_ms_does_not_count_a_cursor_idle_time(db, command):
    """maxTimeMS bounds processing time: the time a cursor waits for the client's next
    getMore does not count (MongoDB's documented rule), whether it is a find or a
    streaming aggregation."""
    coll = db["idle"]
    coll.insert_many([{"_id": i} for i in range(3000)])
    args = (
        {"batchSize": 2}
        if command == "find"
        else {"pipeline": [{"$addFields": {"z": 1}}], "cursor": {"batchSize": 2}}
    )
    reply = db.command(command, "idle", maxTimeMS=400, **args)
    time.sleep(0.6)
    more = db.command("getMore", reply["cursor"]["id"], collection="idle", batchSize=5000)
    assert len(more["cursor"]["nextBatch"]) == 2998


SPIN_1MS = "function() { var d = Date.now(); while (Date.now() - d < 1) {} return true; }"


def test_max_time_ms_counts_every_batch_of_a_cursor(db):
    """maxTimeMS is the cursor's whole processing time: small batches that each stay
    under it still add up to it, and a script in a later batch gets only what is left."""
    coll = db["slow"]
    coll.insert_many([{"_id": i, "a": i} for i in range(1200)])
    coll.create_index("a")
    with raises_code("MaxTimeMSExpired"):
        list(coll.find({"$where": SPIN_1MS}, batch_size=50, max_time_ms=250))
    with raises_code("MaxTimeMSExpired"):
        cursor = coll.find({"a": {"$gte": 0}, "$where": SPIN_1MS}, batch_size=50)
        list(cursor.max_time_ms(250).hint("a_1"))
    stall = "function() { if (this._id == 100) { var d = Date.now(); while (Date.now() - d < 3000) {} } return true; }"
    started = time.monotonic()
    with raises_code("MaxTimeMSExpired"):
        list(coll.find({"$where": stall}, batch_size=10, max_time_ms=600))
    assert time.monotonic() - started < 2.5
    # getMore takes no maxTimeMS of its own (only tailable awaitData cursors do).
    reply = db.command("find", "slow", batchSize=2)
    with raises_code("BadValue"):
        db.command("getMore", reply["cursor"]["id"], collection="slow", maxTimeMS=100)
