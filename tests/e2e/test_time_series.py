"""Time-series collections: measurements stored in buckets (`system.buckets.<name>`,
one meta value and one time span per bucket, MongoDB's bucket format), read back as
ordinary documents, with conditions on the time and meta fields narrowing the buckets
read; deletes rewrite the buckets they touch; listCollections, listIndexes and
collStats present the collection as MongoDB does; the options are checked as mongod
checks them.
"""

from __future__ import annotations

import datetime as dt

import pytest
from pymongo.errors import BulkWriteError, OperationFailure

from helpers import raises_code

T0 = dt.datetime(2024, 1, 1)


def at(minutes: int) -> dt.datetime:
    return T0 + dt.timedelta(minutes=minutes)


@pytest.fixture
def weather(db):
    db.create_collection(
        "weather", timeseries={"timeField": "ts", "metaField": "st", "granularity": "minutes"}
    )
    db.weather.insert_many([{"ts": at(i), "st": i % 3, "temp": i} for i in range(3000)])
    return db.weather


def test_measurements_are_stored_in_buckets_and_read_back(weather):
    db = weather.database
    assert weather.count_documents({}) == 3000
    buckets = db["system.buckets.weather"]
    # At most 1000 measurements and one day (the granularity's span) per bucket, one
    # meta value each.
    assert 3 <= buckets.count_documents({}) < 3000
    bucket = buckets.find_one({"meta": 1})
    assert bucket["control"]["count"] <= 1000
    assert set(bucket["data"]) == {"_id", "ts", "temp"}
    one = weather.find_one({"temp": 5}, {"_id": 0})
    assert one == {"ts": at(5), "temp": 5, "st": 2}


def test_queries_on_time_and_meta(weather):
    assert weather.count_documents({"st": 1}) == 1000
    window = {"ts": {"$gte": at(100), "$lt": at(200)}}
    assert weather.count_documents(window) == 100
    assert weather.count_documents({**window, "st": 0}) == 33
    grouped = weather.aggregate(
        [
            {"$match": {"st": 2}},
            {"$group": {"_id": "$st", "n": {"$sum": 1}, "hot": {"$max": "$temp"}}},
        ]
    )
    assert list(grouped) == [{"_id": 2, "n": 1000, "hot": 2999}]
    assert sorted(weather.distinct("st")) == [0, 1, 2]
    # The reader's conditions on meta and time select the buckets before unpacking.
    plan = weather.database.command(
        "explain", {"find": "weather", "filter": {"st": 1, "ts": {"$gte": at(10)}}}
    )
    # A bucket spans less than bucketMaxSpanSeconds (a day here) from its minimum.
    assert plan["command"]["pipeline"][0] == {
        "$match": {
            "meta": 1,
            "control.min.ts": {"$gt": at(10) - dt.timedelta(days=1)},
            "control.max.ts": {"$gte": at(10)},
        }
    }


def test_time_conditions_read_only_the_buckets_that_can_hold_them(db):
    # Hour-long buckets (granularity seconds); readings each 10 minutes for 4 days,
    # one of them the last millisecond a bucket can hold.
    db.create_collection("readings", timeseries={"timeField": "ts", "metaField": "st"})
    times = [at(10 * i) for i in range(576)] + [at(60) - dt.timedelta(milliseconds=1)]
    db.readings.insert_many([{"ts": t, "st": "a", "v": i} for i, t in enumerate(times)])
    db.readings.create_index([("ts", 1)])
    edge = at(60) - dt.timedelta(milliseconds=1)
    assert [r["v"] for r in db.readings.find({"ts": edge})] == [576]
    assert db.readings.count_documents({"ts": at(600)}) == 1
    assert db.readings.count_documents({"ts": {"$gte": edge, "$lt": at(120)}}) == 7
    assert db.readings.count_documents({"ts": {"$gt": at(5000)}}) == 75
    plan = db.command(
        "explain", {"find": "readings", "filter": {"ts": at(600)}}, verbosity="executionStats"
    )
    stats = plan["stages"][0]["$cursor"]["executionStats"]
    # The index on the buckets' minimum time is read between one span before and the
    # time asked for: one or two buckets, not all 96.
    assert stats["totalKeysExamined"] <= 3
    assert stats["nReturned"] <= 2


def test_deletes_rewrite_the_buckets(weather):
    assert weather.delete_many({"st": 0}).deleted_count == 1000
    assert weather.delete_many({"temp": {"$lt": 10}}).deleted_count == 6
    assert weather.delete_one({"st": 1}).deleted_count == 1
    assert weather.count_documents({}) == 3000 - 1000 - 6 - 1
    assert weather.count_documents({"st": 0}) == 0


def test_a_measurement_needs_its_time(weather):
    with pytest.raises(BulkWriteError) as refused:
        weather.insert_many([{"ts": at(1), "st": 9}, {"st": 9}, {"ts": at(2), "st": 9}])
    assert [e["code"] for e in refused.value.details["writeErrors"]] == [2]
    # An ordered insert stops at the first failure.
    assert weather.count_documents({"st": 9}) == 1


def test_presented_as_mongodb_presents_it(weather):
    db = weather.database
    listed = {c["name"]: c for c in db.list_collections()}
    assert listed["weather"]["type"] == "timeseries"
    assert listed["weather"]["options"] == {
        "timeseries": {
            "timeField": "ts",
            "metaField": "st",
            "granularity": "minutes",
            "bucketMaxSpanSeconds": 86400,
        }
    }
    assert listed["system.buckets.weather"]["type"] == "collection"
    assert [i["key"] for i in weather.list_indexes()] == [{"st": 1, "ts": 1}]
    stats = db.command("collStats", "weather")
    assert stats["timeseries"]["bucketsNs"] == f"{db.name}.system.buckets.weather"
    # What listCollections shows creates the same collection again (mongorestore).
    db.weather.drop()
    db.command("create", "weather", **listed["weather"]["options"])
    assert db.command("collStats", "weather")["timeseries"]["bucketCount"] == 0


def test_views_and_lookups_read_the_measurements(weather):
    db = weather.database
    db.command("create", "warm", viewOn="weather", pipeline=[{"$match": {"temp": {"$gte": 2990}}}])
    assert db.warm.count_documents({}) == 10
    db.stations.insert_many([{"_id": 0}, {"_id": 1}])
    joined = db.stations.aggregate(
        [
            {"$lookup": {"from": "weather", "localField": "_id", "foreignField": "st", "as": "m"}},
            {"$project": {"n": {"$size": "$m"}}},
        ]
    )
    assert sorted((d["_id"], d["n"]) for d in joined) == [(0, 1000), (1, 1000)]


def test_expiry_and_the_commands_a_time_series_refuses(db):
    db.create_collection("ttl", timeseries={"timeField": "ts"}, expireAfterSeconds=3600)
    assert (
        next(c for c in db.list_collections() if c["name"] == "ttl")["options"][
            "expireAfterSeconds"
        ]
        == 3600
    )
    db.ttl.insert_one({"ts": T0})
    with raises_code("CommandNotSupportedOnView"):
        db.client.admin.command("renameCollection", f"{db.name}.ttl", to=f"{db.name}.other")
    with raises_code("NamespaceExists"):
        db.command("create", "ttl")
    with raises_code("InvalidOptions"):
        db.ttl.update_many({}, {"$set": {"x": 1}})


@pytest.mark.parametrize(
    ("options", "code"),
    [
        ({"timeseries": {"timeField": 1}}, "TypeMismatch"),
        ({"timeseries": {"timeField": "a.b"}}, "InvalidOptions"),
        ({"timeseries": {"timeField": "t", "metaField": "t"}}, "InvalidOptions"),
        ({"timeseries": {"timeField": "t", "granularity": "days"}}, "BadValue"),
        ({"timeseries": {"timeField": "t", "bucketMaxSpanSeconds": 60}}, "InvalidOptions"),
        ({"timeseries": {"timeField": "t"}, "capped": True, "size": 4096}, "InvalidOptions"),
        ({"expireAfterSeconds": 10}, "InvalidOptions"),
    ],
)
def test_options_are_checked(db, options, code):
    with raises_code(code):
        db.command("create", "bad", **options)


def test_indexes_are_the_buckets_indexes_shown_as_asked(weather):
    weather.create_index([("st", 1), ("ts", -1)])
    weather.create_index("temp")
    assert [(i["name"], dict(i["key"])) for i in weather.list_indexes()] == [
        ("st_1_ts_1", {"st": 1, "ts": 1}),
        ("st_1_ts_-1", {"st": 1, "ts": -1}),
        ("temp_1", {"temp": 1}),
    ]
    buckets = weather.database["system.buckets.weather"]
    keys = {i["name"]: dict(i["key"]) for i in buckets.list_indexes()}
    assert keys["temp_1"] == {"control.min.temp": 1, "control.max.temp": 1}
    assert keys["st_1_ts_-1"] == {"meta": 1, "control.max.ts": -1, "control.min.ts": -1}
    weather.drop_index("temp_1")
    assert "temp_1" not in [i["name"] for i in weather.list_indexes()]
    for refused, code in [({"unique": True}, 72), ({"sparse": True}, 72)]:
        with pytest.raises(OperationFailure) as failure:
            weather.create_index("temp", **refused)
        assert failure.value.code == code
    with pytest.raises(OperationFailure) as hashed:
        weather.create_index([("temp", "hashed")])
    assert hashed.value.code == 67


def test_updates_change_the_meta_of_whole_buckets(weather):
    result = weather.update_many({"st": 1}, {"$set": {"st": 7}})
    assert (result.matched_count, result.modified_count) == (1000, 1000)
    assert weather.count_documents({"st": 7}) == 1000
    for statement in [
        lambda: weather.update_one({"st": 2}, {"$set": {"st": 8}}),
        lambda: weather.update_many({"temp": 1}, {"$set": {"st": 8}}),
        lambda: weather.update_many({}, {"$set": {"temp": 0}}),
        lambda: weather.update_many({}, {"$set": {"st": 0}}, upsert=True),
    ]:
        with raises_code("InvalidOptions"):
            statement()
    assert weather.find_one_and_delete({"temp": 3})["temp"] == 3
    with raises_code("InvalidOptions"):
        weather.find_one_and_update({"st": 2}, {"$set": {"st": 9}})


def test_coll_mod_grows_the_bucketing_and_sets_expiry(weather):
    db = weather.database
    db.command("collMod", "weather", timeseries={"granularity": "hours"})
    options = db.command("listCollections", filter={"name": "weather"})["cursor"]["firstBatch"][0][
        "options"
    ]
    assert options["timeseries"]["granularity"] == "hours"
    with raises_code("InvalidOptions"):
        db.command("collMod", "weather", timeseries={"granularity": "seconds"})
    db.command("collMod", "weather", expireAfterSeconds=3600)
    listed = db.command("listCollections", filter={"name": "weather"})["cursor"]["firstBatch"][0]
    assert listed["options"]["expireAfterSeconds"] == 3600
    db.command("collMod", "weather", expireAfterSeconds="off")
    with raises_code("InvalidOptions"):
        db.command("collMod", "weather", validator={"temp": {"$gt": 0}})
    assert weather.count_documents({}) == 3000


def test_out_writes_a_time_series_collection(db):
    db.readings.insert_many([{"ts": at(i), "st": i % 2, "v": i} for i in range(10)])
    spec = {"timeField": "ts", "metaField": "st", "granularity": "minutes"}
    out = {"db": db.name, "coll": "series", "timeseries": spec}
    assert list(db.readings.aggregate([{"$match": {"v": {"$lt": 6}}}, {"$out": out}])) == []
    listed = db.command("listCollections", filter={"name": "series"})["cursor"]["firstBatch"]
    assert listed[0]["type"] == "timeseries"
    assert db.series.count_documents({}) == 6
    assert "system.buckets.series" in db.list_collection_names()
    # Again with the same options: the collection is replaced.
    db.readings.aggregate([{"$match": {"v": {"$gte": 8}}}, {"$out": out}])
    assert sorted(d["v"] for d in db.series.find()) == [8, 9]
    # Other options, or an ordinary collection in the way, are refused.
    with raises_code("Location7406103"):
        db.readings.aggregate([{"$out": {**out, "timeseries": {"timeField": "ts"}}}])
    db.plain.insert_one({"_id": 1})
    with raises_code("Location7268700"):
        db.readings.aggregate([{"$out": {**out, "coll": "plain"}}])
    # Without options, $out replaces a time-series collection with an ordinary one.
    db.readings.aggregate([{"$out": "series"}])
    assert db.series.count_documents({}) == 10
    assert "system.buckets.series" not in db.list_collection_names()


def test_reads_answer_as_a_plain_collection_of_the_same_measurements(db):
    """Measurements appended to stored buckets over several inserts, with fields missing,
    nested or of other types, read back through filters that the unpacking tests on
    each measurement (a `$match` after it), only the fields later stages read, and
    filters it leaves to the pipeline (`$expr`): the same answers as a plain collection."""
    db.create_collection("obs", timeseries={"timeField": "ts", "metaField": "st"})

    def measurement(i: int) -> dict:
        doc = {"_id": i, "ts": at(i * 7 % 500), "st": f"s{i % 4}", "temp": i % 41 - 10}
        if i % 5:
            doc["air"] = {"q": str(i % 3), "v": i / 4}
        if i % 11 == 0:
            doc["temp"] = [i, "hot"] if i % 2 else None
        if i % 13 == 0:
            doc["note"] = "rare"
        return doc

    docs = [measurement(i) for i in range(1200)]
    for start in range(0, len(docs), 150):
        db.obs.insert_many(docs[start : start + 150])
        db.plain.insert_many(docs[start : start + 150])
    buckets = list(db["system.buckets.obs"].find())
    assert sum(b["control"]["count"] for b in buckets) == 1200
    for bucket in buckets:
        n = bucket["control"]["count"]
        assert list(bucket["data"]["ts"]) == [str(i) for i in range(n)]
        assert bucket["control"]["max"]["ts"] == max(bucket["data"]["ts"].values())
        # Bounds of a nested document are kept field by field, as MongoDB keeps them.
        airs = list(bucket["data"].get("air", {}).values())
        if airs:
            assert bucket["control"]["max"]["air"]["v"] == max(a["v"] for a in airs)
            assert bucket["control"]["min"]["air"]["q"] == min(a["q"] for a in airs)

    filters = [
        {"air.q": {"$in": ["1", "2"]}},
        {"note": "rare"},
        {"temp": None},
        {"air": {"$exists": False}},
        {"temp": "hot"},
        {"$or": [{"st": "s1"}, {"air.v": {"$gt": 250}}]},
        {"st": "s2", "temp": {"$gte": 20}},
        {"ts": {"$gte": at(100), "$lt": at(130)}, "air.q": "0"},
        {"$expr": {"$gt": ["$air.v", "$temp"]}},
    ]
    for query in filters:
        expected = list(db.plain.find(query).sort("_id", 1))
        assert list(db.obs.find(query).sort("_id", 1)) == expected, query
        pipeline = [
            {"$match": query},
            {"$group": {"_id": "$st", "n": {"$sum": 1}, "top": {"$max": "$air.v"}}},
            {"$sort": {"_id": 1}},
        ]
        assert list(db.obs.aggregate(pipeline)) == list(db.plain.aggregate(pipeline)), query
        projected = [{"$match": query}, {"$project": {"air.q": 1}}, {"$sort": {"_id": 1}}]
        assert list(db.obs.aggregate(projected)) == list(db.plain.aggregate(projected)), query


def test_a_2dsphere_index_on_a_measurement_field_and_geo_near(db):
    """A `2dsphere` index on a measurement field is the buckets' `2dsphere_bucket` index
    on its column (MongoDB's translation), listed as asked; `$geoNear` measures the
    measurements its query keeps, nearest first, as on a plain collection; `$geoWithin`
    finds the measurements inside a region."""
    db.create_collection("geo", timeseries={"timeField": "ts", "metaField": "st"})
    docs = [
        {
            "_id": i,
            "ts": at(i // 20),
            "st": f"s{i % 20}",
            "pos": {"type": "Point", "coordinates": [(i % 20) * 0.5, (i % 20) * 0.25]},
        }
        for i in range(400)
    ]
    db.geo.insert_many(docs)
    db.plain.insert_many(docs)
    db.geo.create_index([("pos", "2dsphere")])
    db.plain.create_index([("pos", "2dsphere")])
    keys = {index["name"]: index["key"] for index in db.geo.list_indexes()}
    assert keys["pos_2dsphere"] == {"pos": "2dsphere"}
    bucket_keys = [index["key"] for index in db["system.buckets.geo"].list_indexes()]
    assert {"data.pos": "2dsphere_bucket"} in bucket_keys

    near = {"type": "Point", "coordinates": [3.1, 1.6]}
    pipeline = [
        {
            "$geoNear": {
                "near": near,
                "key": "pos",
                "distanceField": "d",
                "query": {"ts": at(7)},
                "spherical": True,
            }
        },
        {"$limit": 3},
        {"$project": {"_id": 1, "st": 1, "d": 1}},
    ]
    found = list(db.geo.aggregate(pipeline))
    assert [d["_id"] for d in found] == [d["_id"] for d in db.plain.aggregate(pipeline)]
    assert [d["st"] for d in found] == ["s6", "s7", "s5"]
    assert found[0]["d"] < found[1]["d"] < found[2]["d"]
    # Without `key`, the only geo index's field is measured.
    del pipeline[0]["$geoNear"]["key"]
    assert [d["_id"] for d in db.geo.aggregate(pipeline)] == [d["_id"] for d in found]

    region = {
        "$geometry": {
            "type": "Polygon",
            "coordinates": [[[1.9, 0.9], [4.1, 0.9], [4.1, 2.1], [1.9, 2.1], [1.9, 0.9]]],
        }
    }
    inside = {"pos": {"$geoWithin": region}}
    assert db.geo.count_documents(inside) == db.plain.count_documents(inside) == 100

    # A measurement whose position is no geometry is refused, as a document would be.
    with raises_code("Location16755"):
        db.geo.insert_one({"ts": at(1), "st": "x", "pos": {"type": "Point"}})
    with raises_code("CannotCreateIndex"):
        db.plain.create_index([("pos", "2dsphere_bucket")])


def test_explain_shows_the_match_inside_the_unpacking(weather):
    db = weather.database
    pipeline = [{"$match": {"st": 1, "temp": {"$gt": 2000}}}, {"$count": "n"}]
    explained = db.command("explain", {"aggregate": "weather", "pipeline": pipeline, "cursor": {}})
    stages = explained["stages"]
    unpack = next(s["$_internalUnpackBucket"] for s in stages if "$_internalUnpackBucket" in s)
    assert unpack["eventFilter"] == {"st": 1, "temp": {"$gt": 2000}}
    assert not any("$match" in s for s in stages)
    assert list(weather.aggregate(pipeline)) == [{"n": 333}]
