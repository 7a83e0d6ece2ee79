"""Capped collections: a size bound in bytes (`size`) and optionally in documents
(`max`); the oldest documents go as new ones arrive, natural order is insertion order,
and tailable cursors follow the newest ones (with `awaitData`, a getMore waits for one).
`convertToCapped`, `cloneCollectionAsCapped` and collMod's `cappedSize`/`cappedMax`
change or copy them, as in MongoDB.
"""

from __future__ import annotations

import threading
import time

import pytest
from pymongo import CursorType
from pymongo.errors import OperationFailure

from helpers import ids, raises_code

PAD = "x" * 200


def test_options_are_listed_and_reported(db):
    db.create_collection("log", capped=True, size=10_000, max=50)
    options = next(c for c in db.list_collections() if c["name"] == "log")["options"]
    # The size is kept rounded up to a multiple of 256, as mongod keeps it.
    assert options == {"capped": True, "size": 10_240, "max": 50}
    stats = db.command("collStats", "log")
    assert (stats["capped"], stats["max"], stats["maxSize"]) == (True, 50, 10_240)
    assert db.command("serverStatus")["catalogStats"]["capped"] >= 1


def test_the_oldest_documents_go_first(db):
    db.create_collection("bymax", capped=True, size=100_000, max=3)
    for i in range(10):
        db.bymax.insert_one({"_id": i})
    assert ids(db.bymax.find()) == [7, 8, 9]
    db.create_collection("bysize", capped=True, size=4096)
    db.bysize.insert_many([{"_id": i, "pad": PAD} for i in range(100)])
    kept = ids(db.bysize.find())
    assert kept == list(range(100 - len(kept), 100))
    assert db.command("collStats", "bysize")["size"] <= 4096
    # Natural order backwards, by sort or by hint.
    assert ids(db.bysize.find().sort("$natural", -1))[:2] == [99, 98]
    assert ids(db.bysize.find().hint([("$natural", -1)]))[:2] == [99, 98]


def test_tailable_await_cursor_follows_new_documents(db):
    db.create_collection("feed", capped=True, size=100_000)
    db.feed.insert_many([{"_id": i} for i in range(3)])
    cursor = db.feed.find(cursor_type=CursorType.TAILABLE_AWAIT).max_await_time_ms(2000)
    assert [next(cursor)["_id"] for _ in range(3)] == [0, 1, 2]

    def insert_later():
        time.sleep(0.3)
        db.feed.insert_one({"_id": 3})

    threading.Thread(target=insert_later).start()
    started = time.monotonic()
    assert next(cursor)["_id"] == 3
    assert 0.2 < time.monotonic() - started < 2.0
    assert cursor.alive
    cursor.close()


def test_an_await_without_news_returns_an_empty_batch_and_stays_open(db):
    db.create_collection("quiet", capped=True, size=4096)
    db.quiet.insert_one({"_id": 1})
    reply = db.command("find", "quiet", tailable=True, awaitData=True)
    cursor_id = reply["cursor"]["id"]
    assert cursor_id != 0
    started = time.monotonic()
    more = db.command("getMore", cursor_id, collection="quiet", maxTimeMS=200)
    assert more["cursor"]["nextBatch"] == [] and more["cursor"]["id"] == cursor_id
    assert time.monotonic() - started >= 0.15


def test_tailable_cursor_rules(db):
    db.create_collection("empty_capped", capped=True, size=4096)
    # An empty capped collection gives a dead cursor, as in MongoDB.
    assert db.command("find", "empty_capped", tailable=True)["cursor"]["id"] == 0
    db.plain.insert_one({"_id": 1})
    with raises_code("BadValue"):
        db.command("find", "plain", tailable=True)
    db.empty_capped.insert_one({"_id": 1})
    with raises_code("BadValue"):
        db.command("find", "empty_capped", tailable=True, sort={"_id": 1})


def test_a_tailing_cursor_overtaken_by_removals_reports_it(db):
    db.create_collection("small", capped=True, size=4096, max=2)
    db.small.insert_many([{"_id": 1}, {"_id": 2}])
    reply = db.command("find", "small", tailable=True, batchSize=1)
    cursor_id = reply["cursor"]["id"]
    db.small.insert_many([{"_id": i} for i in range(3, 8)])
    with pytest.raises(OperationFailure) as lost:
        db.command("getMore", cursor_id, collection="small")
    assert lost.value.code == 136  # CappedPositionLost


def test_convert_and_clone(db):
    db.src.insert_many([{"_id": i, "pad": PAD} for i in range(100)])
    db.src.create_index("pad")
    db.command("cloneCollectionAsCapped", "src", toCollection="copy", size=4096)
    copied = ids(db.copy.find())
    assert copied[-1] == 99 and len(copied) < 100
    assert db.src.count_documents({}) == 100
    db.command("convertToCapped", "src", size=8192)
    assert db.command("collStats", "src")["capped"] is True
    assert [i["name"] for i in db.src.list_indexes()] == ["_id_"]
    assert ids(db.src.find())[-1] == 99
    with raises_code("NamespaceNotFound"):
        db.command("convertToCapped", "missing", size=4096)
    with raises_code("NamespaceExists"):
        db.command("cloneCollectionAsCapped", "src", toCollection="copy", size=4096)


def test_coll_mod_changes_the_bounds(db):
    db.create_collection("c", capped=True, size=100_000)
    db.c.insert_many([{"_id": i} for i in range(5)])
    db.command("collMod", "c", cappedMax=2)
    # Existing documents stay until the next insert, as in MongoDB.
    assert ids(db.c.find()) == [0, 1, 2, 3, 4]
    db.c.insert_one({"_id": 5})
    assert ids(db.c.find()) == [4, 5]
    db.plain.insert_one({"_id": 1})
    with raises_code("InvalidOptions"):
        db.command("collMod", "plain", cappedSize=4096)


@pytest.mark.parametrize(
    ("options", "code"),
    [
        ({"capped": True}, "InvalidOptions"),
        ({"size": 4096}, "InvalidOptions"),
        ({"capped": True, "size": 0}, "BadValue"),
        ({"capped": True, "size": 2**50 + 1}, "BadValue"),
        ({"capped": True, "size": "big"}, "TypeMismatch"),
        ({"capped": True, "size": 4096, "max": 2**31}, "BadValue"),
    ],
)
def test_bounds_are_checked(db, options, code):
    with raises_code(code):
        db.command("create", "bad", **options)
