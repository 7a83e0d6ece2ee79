"""Insert, find, update, delete, findAndModify, count and distinct through pymongo.

These are the operations every application uses; besides the data, the tests pin
the reply fields drivers turn into result objects (n, nModified, upserted,
writeErrors with index/code/keyPattern/keyValue, lastErrorObject).
"""

from __future__ import annotations

import pytest
from bson import Int64, ObjectId
from pymongo import ASCENDING, DESCENDING, ReturnDocument
from pymongo.errors import BulkWriteError, DuplicateKeyError

from helpers import ids, raises_code

# --- insert -------------------------------------------------------------------------


def test_insert_one_and_find_it(coll):
    result = coll.insert_one({"name": "basalt", "n": 1})
    assert isinstance(result.inserted_id, ObjectId)
    assert coll.find_one({"name": "basalt"}) == {
        "_id": result.inserted_id,
        "name": "basalt",
        "n": 1,
    }


def test_server_generates_object_id_first(db):
    """A document sent without _id gets an ObjectId, stored as the first field."""
    reply = db.command("insert", "c", documents=[{"x": 1}, {"y": 2}])
    assert reply["n"] == 2
    docs = list(db["c"].find())
    assert [list(d) for d in docs] == [["_id", "x"], ["_id", "y"]]
    assert all(isinstance(d["_id"], ObjectId) for d in docs)
    assert docs[0]["_id"] != docs[1]["_id"]


def test_id_is_moved_to_the_front(db):
    db.command("insert", "c", documents=[{"x": 1, "_id": 5}])
    assert list(db["c"].find_one()) == ["_id", "x"]


def test_insert_one_duplicate_key(coll):
    coll.insert_one({"_id": "k"})
    with pytest.raises(DuplicateKeyError) as info:
        coll.insert_one({"_id": "k"})
    details = info.value.details
    assert info.value.code == 11000
    assert details["keyPattern"] == {"_id": 1}
    assert details["keyValue"] == {"_id": "k"}
    assert "E11000 duplicate key error" in details["errmsg"]


@pytest.mark.parametrize(
    "ordered, stored, error_indexes",
    [
        (True, [0, 1], [2]),  # an ordered insert stops at the first error
        (False, [0, 1, 2, 3], [2, 4]),  # an unordered one carries on
    ],
)
def test_insert_many_with_duplicates(coll, ordered, stored, error_indexes):
    docs = [{"_id": 0}, {"_id": 1}, {"_id": 1}, {"_id": 2}, {"_id": 2}, {"_id": 3}]
    with pytest.raises(BulkWriteError) as info:
        coll.insert_many(docs, ordered=ordered)
    details = info.value.details
    assert details["nInserted"] == len(stored)
    assert [e["index"] for e in details["writeErrors"]] == error_indexes
    for error in details["writeErrors"]:
        assert error["code"] == 11000
        assert error["keyPattern"] == {"_id": 1}
        assert error["keyValue"] == {"_id": docs[error["index"]]["_id"]}
    assert ids(coll.find().sort("_id", ASCENDING)) == stored


# --- find ---------------------------------------------------------------------------

DATA = [{"_id": i, "a": i % 3, "b": 30 - i, "sub": {"v": i, "w": -i}} for i in range(30)]


def _project(doc: dict, fields: list[str], keep_id: bool = True) -> dict:
    out = {"_id": doc["_id"]} if keep_id else {}
    out.update({f: doc[f] for f in fields})
    return out


FIND_CASES = {
    "filter": (dict(filter={"a": 1}), [d for d in DATA if d["a"] == 1]),
    "sort ascending": (dict(filter={"a": 2}, sort=[("b", ASCENDING)]), sorted((d for d in DATA if d["a"] == 2), key=lambda d: d["b"])),
    "sort on two keys": (dict(sort=[("a", ASCENDING), ("b", DESCENDING)]), sorted(DATA, key=lambda d: (d["a"], -d["b"]))),
    "skip and limit": (dict(sort=[("_id", DESCENDING)], skip=5, limit=3), DATA[::-1][5:8]),
    "limit only": (dict(limit=4), DATA[:4]),
    "inclusion": (dict(filter={"_id": {"$lt": 3}}, projection={"b": 1}), [_project(d, ["b"]) for d in DATA[:3]]),
    "inclusion without _id": (dict(filter={"_id": {"$lt": 3}}, projection={"b": 1, "_id": 0}), [_project(d, ["b"], keep_id=False) for d in DATA[:3]]),
    "exclusion": (dict(filter={"_id": {"$lt": 3}}, projection={"sub": 0, "a": 0}), [_project(d, ["b"]) for d in DATA[:3]]),
    "dotted inclusion": (dict(filter={"_id": 7}, projection={"sub.v": 1}), [{"_id": 7, "sub": {"v": 7}}]),
    "nested filter": (dict(filter={"sub.w": {"$lte": -28}}), DATA[28:]),
}  # fmt: skip


@pytest.mark.parametrize("kwargs, expected", FIND_CASES.values(), ids=FIND_CASES.keys())
def test_find_options(coll, kwargs, expected):
    coll.insert_many(DATA)
    assert list(coll.find(**kwargs)) == expected


def test_find_batch_size_over_raw_commands(db):
    db["c"].insert_many([{"_id": i} for i in range(20)])
    first = db.command("find", "c", batchSize=7)["cursor"]
    assert ids(first["firstBatch"]) == list(range(7))
    assert first["id"] != 0 and first["ns"] == f"{db.name}.c"
    second = db.command("getMore", first["id"], collection="c", batchSize=7)["cursor"]
    assert ids(second["nextBatch"]) == list(range(7, 14))
    last = db.command("getMore", first["id"], collection="c", batchSize=7)["cursor"]
    assert ids(last["nextBatch"]) == list(range(14, 20))
    assert last["id"] == 0


# --- update -------------------------------------------------------------------------


def test_update_many_counts_matched_and_modified(coll):
    coll.insert_many(
        [{"_id": 1, "a": 1}, {"_id": 2, "a": 1, "b": 5}, {"_id": 3, "a": 1}, {"_id": 4, "a": 2}]
    )
    result = coll.update_many({"a": 1}, {"$set": {"b": 5}})
    assert (result.matched_count, result.modified_count) == (3, 2)
    assert result.upserted_id is None
    assert ids(coll.find({"b": 5})) == [1, 2, 3]


def test_update_one_touches_one_document(coll):
    coll.insert_many([{"_id": i, "a": 1} for i in range(3)])
    result = coll.update_one({"a": 1}, {"$set": {"a": 2}})
    assert (result.matched_count, result.modified_count) == (1, 1)
    assert coll.count_documents({"a": 2}) == 1


def test_upsert_with_id_in_filter(coll):
    result = coll.update_one({"_id": "new"}, {"$set": {"v": 1}}, upsert=True)
    assert (result.matched_count, result.modified_count, result.upserted_id) == (0, 0, "new")
    assert coll.find_one() == {"_id": "new", "v": 1}


def test_upsert_copies_equality_fields_and_generates_id(coll):
    result = coll.update_one({"k": 7, "n": {"$gt": 1}}, {"$set": {"v": 1}}, upsert=True)
    assert isinstance(result.upserted_id, ObjectId)
    assert coll.find_one() == {"_id": result.upserted_id, "k": 7, "v": 1}


def test_raw_update_reply_fields(db):
    db["c"].insert_many([{"_id": 1, "v": 0}, {"_id": 2, "v": 0}])
    reply = db.command(
        "update",
        "c",
        updates=[
            {"q": {"_id": 1}, "u": {"$set": {"v": 1}}},
            {"q": {"_id": "x"}, "u": {"$set": {"v": 2}}, "upsert": True},
            {"q": {"_id": 2}, "u": {"$set": {"v": 0}}},  # matches, changes nothing
        ],
    )
    assert reply["n"] == 3
    assert reply["nModified"] == 1
    assert reply["upserted"] == [{"index": 1, "_id": "x"}]


def test_replace_one(coll):
    coll.insert_one({"_id": 1, "a": 1, "b": 2})
    result = coll.replace_one({"_id": 1}, {"c": 3})
    assert (result.matched_count, result.modified_count) == (1, 1)
    assert coll.find_one() == {"_id": 1, "c": 3}


def test_replacement_may_not_change_id(coll):
    coll.insert_one({"_id": 1, "a": 1})
    with raises_code("ImmutableField"):
        coll.replace_one({"_id": 1}, {"_id": 2, "a": 1})
    assert coll.find_one() == {"_id": 1, "a": 1}


# --- delete -------------------------------------------------------------------------


def test_delete_limit_one_then_all(db):
    db["c"].insert_many([{"_id": i, "a": 1} for i in range(5)] + [{"_id": 9, "a": 2}])
    one = db.command("delete", "c", deletes=[{"q": {"a": 1}, "limit": 1}])
    assert one["n"] == 1
    rest = db.command("delete", "c", deletes=[{"q": {"a": 1}, "limit": 0}])
    assert rest["n"] == 4
    assert ids(db["c"].find()) == [9]


def test_delete_one_and_many(coll):
    coll.insert_many([{"_id": i, "a": i % 2} for i in range(10)])
    assert coll.delete_one({"a": 0}).deleted_count == 1
    assert coll.delete_many({"a": 1}).deleted_count == 5
    assert coll.delete_many({"a": 7}).deleted_count == 0
    assert ids(coll.find()) == [2, 4, 6, 8]


# --- findAndModify ------------------------------------------------------------------


@pytest.mark.parametrize(
    "return_document, expected",
    [(ReturnDocument.BEFORE, {"_id": 1, "n": 1}), (ReturnDocument.AFTER, {"_id": 1, "n": 11})],
)
def test_find_one_and_update_returns_before_or_after(coll, return_document, expected):
    coll.insert_one({"_id": 1, "n": 1})
    assert (
        coll.find_one_and_update({"_id": 1}, {"$inc": {"n": 10}}, return_document=return_document)
        == expected
    )
    assert coll.find_one() == {"_id": 1, "n": 11}


def test_find_one_and_update_sort_projection_and_miss(coll):
    coll.insert_many([{"_id": i, "n": i, "extra": "x"} for i in range(3)])
    updated = coll.find_one_and_update(
        {},
        {"$inc": {"n": 10}},
        sort=[("n", DESCENDING)],
        projection={"n": 1},
        return_document=ReturnDocument.AFTER,
    )
    assert updated == {"_id": 2, "n": 12}
    assert coll.find_one_and_update({"_id": 99}, {"$set": {"n": 0}}) is None


def test_find_one_and_update_upsert(coll):
    doc = coll.find_one_and_update(
        {"_id": "u"}, {"$set": {"v": 1}}, upsert=True, return_document=ReturnDocument.AFTER
    )
    assert doc == {"_id": "u", "v": 1}


def test_find_one_and_replace(coll):
    coll.insert_one({"_id": 1, "a": 1})
    assert coll.find_one_and_replace({"a": 1}, {"b": 2}) == {"_id": 1, "a": 1}
    assert coll.find_one() == {"_id": 1, "b": 2}


def test_find_one_and_delete_with_sort(coll):
    coll.insert_many([{"_id": i, "n": i} for i in range(4)])
    assert coll.find_one_and_delete({}, sort=[("n", DESCENDING)]) == {"_id": 3, "n": 3}
    assert ids(coll.find()) == [0, 1, 2]


def test_raw_find_and_modify_last_error_object(db):
    db["c"].insert_one({"_id": 1, "v": 0})
    hit = db.command("findAndModify", "c", query={"_id": 1}, update={"$set": {"v": 1}})
    assert hit["lastErrorObject"] == {"n": 1, "updatedExisting": True}
    assert hit["value"] == {"_id": 1, "v": 0}
    upsert = db.command(
        "findAndModify", "c", query={"_id": 2}, update={"$set": {"v": 2}}, upsert=True, new=True
    )
    assert upsert["lastErrorObject"] == {"n": 1, "updatedExisting": False, "upserted": 2}
    assert upsert["value"] == {"_id": 2, "v": 2}
    removed = db.command("findAndModify", "c", query={"_id": 1}, remove=True)
    assert removed["lastErrorObject"] == {"n": 1}
    assert removed["value"] == {"_id": 1, "v": 1}
    miss = db.command("findAndModify", "c", query={"_id": 9}, remove=True)
    assert miss["lastErrorObject"] == {"n": 0}
    assert miss["value"] is None


# --- count and distinct -------------------------------------------------------------


def test_count_documents_and_estimates(db, coll):
    coll.insert_many([{"_id": i, "a": i % 4} for i in range(40)])
    assert coll.count_documents({}) == 40
    assert coll.count_documents({"a": 1}) == 10
    assert coll.count_documents({"a": 1}, skip=3, limit=5) == 5
    assert coll.count_documents({"a": 1}, skip=8) == 2
    assert coll.estimated_document_count() == 40
    assert db.command("count", "c", query={"a": {"$gte": 2}})["n"] == 20
    assert db.command("count", "missing")["n"] == 0
    # A negative limit counts as a positive one; the smallest long has none: BadValue.
    assert db.command("count", "c", limit=-5)["n"] == 5
    with raises_code("BadValue"):
        db.command("count", "c", limit=Int64(-(2**63)))


def test_distinct(coll):
    coll.insert_many(
        [
            {"_id": 1, "tag": ["a", "b"], "k": 1, "sub": {"v": "x"}},
            {"_id": 2, "tag": ["b", "c"], "k": 1, "sub": {"v": "y"}},
            {"_id": 3, "tag": "d", "k": 2, "sub": {"v": "x"}},
            {"_id": 4, "k": 2},
        ]
    )
    assert sorted(coll.distinct("tag")) == ["a", "b", "c", "d"]  # arrays are unwound
    assert sorted(coll.distinct("tag", {"k": 1})) == ["a", "b", "c"]
    assert sorted(coll.distinct("sub.v")) == ["x", "y"]
    assert sorted(coll.distinct("k")) == [1, 2]
    assert coll.distinct("missing") == []


def test_distinct_checks_its_command_as_mongod(coll, db):
    coll.insert_many([{"_id": 1, "x": "a"}, {"_id": 2, "x": "b"}])
    coll.create_index("x")
    # A hint names an index (by name or key) or the natural order, and is used.
    assert sorted(db.command("distinct", "c", key="x", hint="x_1")["values"]) == ["a", "b"]
    assert db.command("distinct", "c", key="x", hint={"$natural": -1})["values"]
    for bad_hint, code in [
        ("nope", "BadValue"),
        ({"x": 2}, "BadValue"),
        ({"$natural": 0}, "BadValue"),
        (None, "FailedToParse"),
        (5, "FailedToParse"),
    ]:
        with raises_code(code):
            db.command("distinct", "c", key="x", hint=bad_hint)
    with raises_code("Location40414"):
        db.command("distinct", "c", key=None)
    with raises_code("Location40415"):
        db.command("distinct", "c", key="x", Query={})
    with raises_code("InvalidOptions"):
        db.command("distinct", "c", key="x", writeConcern={"w": 1})
