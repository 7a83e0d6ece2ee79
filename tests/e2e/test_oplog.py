"""`local.oplog.rs` on a replica set member, read through pymongo as tools and oplog
tailers read mongod's: MongoDB's entry shapes (`ts`, `t`, `v`, `op`, `ns`, `ui`, `o`,
`o2`, `wall`; updates as `{$v: 2, diff}`), natural and reverse order, a `ts` filter, a
tailable awaitData cursor that sees new writes, count/aggregate/collStats/listCollections,
entries replayed by `applyOps` on a standalone, and writes refused.
"""

from __future__ import annotations

import threading
import time

import bson
import pytest
from pymongo import CursorType
from pymongo.errors import OperationFailure

from helpers import raises_code


@pytest.fixture
def client(one_member_set):
    return one_member_set.client()


def try_next(cursor):
    """The next entry of a tailable cursor, or None when none has come (it stays alive)."""
    try:
        return cursor.next()
    except StopIteration:
        return None


def oplog_of(client, ns: str) -> list[dict]:
    return list(client.local["oplog.rs"].find({"ns": ns}))


def test_entries_have_mongodbs_shape(client):
    coll = client.shop.items
    coll.insert_one({"_id": 1, "a": 1, "b": {"c": 1}, "arr": [1, 2, 3], "gone": True})
    coll.update_one(
        {"_id": 1},
        {"$set": {"a": 2, "b.c": 5, "new": 0, "arr.1": 9}, "$unset": {"gone": ""}},
    )
    coll.update_one({"_id": 1}, {"$pop": {"arr": 1}})
    coll.replace_one({"_id": 1}, {"x": 1})
    coll.delete_one({"_id": 1})
    entries = oplog_of(client, "shop.items")
    assert [e["op"] for e in entries] == ["i", "u", "u", "u", "d"]
    uuid = client.shop.command("listCollections", filter={"name": "items"})["cursor"]["firstBatch"][
        0
    ]["info"]["uuid"]
    for entry in entries:
        assert isinstance(entry["ts"], bson.Timestamp)
        assert isinstance(entry["t"], int) and entry["t"] >= 1
        assert entry["v"] == 2
        assert entry["ui"] == uuid
        assert entry["wall"].year >= 2024
        assert "preImage" not in entry and "postImage" not in entry
    assert [e["ts"] for e in entries] == sorted(e["ts"] for e in entries)
    insert, update, pop, replace, delete = entries
    assert insert["o"] == {"_id": 1, "a": 1, "b": {"c": 1}, "arr": [1, 2, 3], "gone": True}
    assert update["o2"] == {"_id": 1}
    assert update["o"] == {
        "$v": 2,
        "diff": {
            "d": {"gone": False},
            "u": {"a": 2},
            "i": {"new": 0},
            "sb": {"u": {"c": 5}},
            "sarr": {"a": True, "u1": 9},
        },
    }
    assert pop["o"] == {"$v": 2, "diff": {"sarr": {"a": True, "l": 2}}}
    assert replace["o"] == {"_id": 1, "x": 1} and replace["o2"] == {"_id": 1}
    assert delete["o"] == {"_id": 1}
    # DDL as commands on `db.$cmd`.
    client.shop.drop_collection("items")
    drops = list(client.local["oplog.rs"].find({"ns": "shop.$cmd", "o.drop": "items"}))
    assert len(drops) == 1 and drops[0]["op"] == "c"


def test_entries_never_show_the_images_kept_for_change_streams(client):
    client.shop.create_collection("imaged", changeStreamPreAndPostImages={"enabled": True})
    client.shop.imaged.insert_one({"_id": 1, "v": 1})
    client.shop.imaged.update_one({"_id": 1}, {"$set": {"v": 2}})
    oplog = client.local["oplog.rs"]
    update = {"ns": "shop.imaged", "op": "u"}
    assert oplog.count_documents({**update, "preImage": {"$exists": False}}) == 1
    assert oplog.count_documents({**update, "preImage": {"$exists": True}}) == 0
    assert "postImage" not in oplog.find_one(update)


def test_natural_order_reverse_order_and_ts_filter(client):
    coll = client.shop.seq
    for i in range(20):
        coll.insert_one({"_id": i})
    oplog = client.local["oplog.rs"]
    last = oplog.find().sort("$natural", -1).limit(1).next()
    assert last["ns"] == "shop.seq" and last["o"] == {"_id": 19}
    first = oplog.find().sort("$natural", 1).limit(1).next()
    assert first["ts"] < last["ts"]
    ours = list(oplog.find({"ns": "shop.seq"}))
    middle = ours[9]["ts"]
    after = list(oplog.find({"ts": {"$gt": middle}, "ns": "shop.seq"}))
    assert [e["o"]["_id"] for e in after] == list(range(10, 20))
    from_ = list(oplog.find({"ts": {"$gte": middle}, "ns": "shop.seq"}))
    assert [e["o"]["_id"] for e in from_] == list(range(9, 20))
    backwards = list(oplog.find({"ns": "shop.seq"}).sort("$natural", -1).skip(2).limit(3))
    assert [e["o"]["_id"] for e in backwards] == [17, 16, 15]
    by_id = list(oplog.find({"ns": "shop.seq"}, {"o._id": 1, "_id": 0}).sort("o._id", -1).limit(2))
    assert by_id == [{"o": {"_id": 19}}, {"o": {"_id": 18}}]
    # Small batches through getMores.
    assert len(list(oplog.find({"ns": "shop.seq"}, batch_size=3))) == 20
    assert oplog.count_documents({"ns": "shop.seq", "op": "i"}) == 20
    assert oplog.estimated_document_count() >= 20
    grouped = list(
        oplog.aggregate(
            [{"$match": {"ns": "shop.seq"}}, {"$group": {"_id": "$op", "n": {"$sum": 1}}}]
        )
    )
    assert grouped == [{"_id": "i", "n": 20}]


def test_a_tailable_await_data_cursor_sees_new_writes(client):
    coll = client.shop.tail
    coll.insert_one({"_id": "before"})
    oplog = client.local["oplog.rs"]
    start = oplog.find().sort("$natural", -1).limit(1).next()["ts"]
    cursor = oplog.find(
        {"ts": {"$gt": start}, "ns": "shop.tail"},
        cursor_type=CursorType.TAILABLE_AWAIT,
    ).max_await_time_ms(200)
    assert try_next(cursor) is None
    assert cursor.alive

    def write_later():
        time.sleep(0.3)
        for i in range(5):
            coll.insert_one({"_id": i})

    writer = threading.Thread(target=write_later)
    writer.start()
    seen, deadline = [], time.monotonic() + 10
    while len(seen) < 5 and time.monotonic() < deadline:
        entry = try_next(cursor)
        if entry is not None:
            seen.append(entry["o"]["_id"])
    writer.join()
    assert seen == [0, 1, 2, 3, 4]
    assert cursor.alive
    # An awaitData getMore waits for its maxTimeMS, then returns an empty batch.
    began = time.monotonic()
    assert try_next(cursor) is None
    assert 0.15 <= time.monotonic() - began < 3
    cursor.close()


def test_tailable_without_await_returns_at_once(client):
    client.shop.t2.insert_one({"_id": 1})
    cursor = client.local["oplog.rs"].find({"ns": "shop.t2"}, cursor_type=CursorType.TAILABLE)
    assert cursor.next()["o"] == {"_id": 1}
    began = time.monotonic()
    assert try_next(cursor) is None
    assert time.monotonic() - began < 0.5
    client.shop.t2.insert_one({"_id": 2})
    assert try_next(cursor)["o"] == {"_id": 2}


def test_listing_stats_and_refused_operations(client):
    client.shop.x.insert_one({"_id": 1})
    local = client.local
    listed = local.command("listCollections", filter={"name": "oplog.rs"})["cursor"]["firstBatch"]
    assert len(listed) == 1 and listed[0]["options"]["capped"] is True
    stats = local.command("collStats", "oplog.rs")
    assert stats["capped"] is True and stats["count"] >= 1
    assert stats["maxSize"] == 990 * 1024 * 1024
    storage = next(local["oplog.rs"].aggregate([{"$collStats": {"storageStats": {}}}]))
    assert storage["storageStats"]["maxSize"] == stats["maxSize"]
    with raises_code("InvalidNamespace"):
        local["oplog.rs"].insert_one({"op": "n"})
    with raises_code("InvalidNamespace"):
        local["oplog.rs"].delete_many({})
    with raises_code("InvalidNamespace"):
        local.drop_collection("oplog.rs")
    with pytest.raises(OperationFailure, match="tailable"):
        list(local["oplog.rs"].find(cursor_type=CursorType.TAILABLE).sort("$natural", -1))
    # Tailable cursors on ordinary collections are still refused.
    with raises_code("BadValue"):
        list(client.shop.x.find(cursor_type=CursorType.TAILABLE))
    assert client.shop.x.count_documents({}) == 1


def test_the_oplog_replays_on_a_standalone(client, own_server):
    coll = client.shop.replay
    coll.insert_many([{"_id": i, "v": [i, {"w": i}], "n": {"m": i}} for i in range(5)])
    coll.update_many({}, {"$inc": {"n.m": 10}, "$push": {"v": "x"}, "$set": {"new": True}})
    coll.update_one({"_id": 2}, {"$unset": {"n": ""}, "$set": {"v.1.w": "changed"}})
    coll.update_one({"_id": 3}, {"$pop": {"v": 1}})
    coll.replace_one({"_id": 4}, {"whole": "new"})
    coll.delete_one({"_id": 0})
    entries = [
        {k: e[k] for k in ("op", "ns", "o", "o2") if k in e}
        for e in client.local["oplog.rs"].find({"ns": "shop.replay"})
    ]
    target = own_server.client()
    target.admin.command("applyOps", entries)
    assert list(target.shop.replay.find().sort("_id")) == list(coll.find().sort("_id"))
    # A diff that does not fit the document is refused, nothing applied.
    with raises_code("BadValue"):
        target.admin.command(
            "applyOps",
            [
                {
                    "op": "u",
                    "ns": "shop.replay",
                    "o2": {"_id": 1},
                    "o": {"$v": 2, "diff": {"snew": {"u": {"a": 1}}}},
                }
            ],
        )
