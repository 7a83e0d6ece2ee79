"""`basalt dump`, `basalt restore` and `basalt export` against a live server: round
trips of every BSON type, indexes, collection options and views through a dump
directory, a gzipped directory, an archive and a gzipped archive; namespace selection
and renames; exports as JSON lines, a JSON array and CSV read back and compared; and,
where MongoDB's Database Tools are installed, files passed both ways between Basalt's
tools and mongodump/mongorestore.
"""

from __future__ import annotations

import csv
import datetime
import io
import json
import re
import subprocess
import uuid

import bson
import bson.json_util
import pytest
from bson import Binary, Code, Decimal128, Int64, MaxKey, MinKey, ObjectId, Regex, Timestamp
from bson.raw_bson import RawBSONDocument
from test_operations import tool

from basalt_server import default_binary

EVERY_TYPE = {
    "double": 1.5,
    "string": "héllo",
    "doc": {"a": {"b": [1, 2]}},
    "array": [1, "two", {"three": 3}],
    "binary": Binary(b"\x00\x01\xff", 0),
    "uuid": Binary.from_uuid(uuid.UUID("12345678-1234-5678-1234-567812345678")),
    "oid": ObjectId("5f1d7f3e9d3b2a1c0b0a0908"),
    "bool": True,
    "date": datetime.datetime(2021, 3, 4, 5, 6, 7, 890000),
    "null": None,
    "regex": Regex("^a.*b$", "i"),
    "code": Code("function () { return 1; }"),
    "int32": 42,
    "timestamp": Timestamp(1600000000, 7),
    "int64": Int64(2**40),
    "decimal": Decimal128("1.10"),
    "minkey": MinKey(),
    "maxkey": MaxKey(),
}


def basalt(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [str(default_binary()), *args], input=stdin, capture_output=True, timeout=120
    )
    assert done.returncode == 0, done.stderr.decode()
    return done


def raw_documents(collection) -> list[bytes]:
    """The documents' exact bytes, in _id order."""
    options = bson.CodecOptions(document_class=RawBSONDocument)
    return [d.raw for d in collection.with_options(codec_options=options).find().sort("_id", 1)]


@pytest.fixture
def shop(server, client, db):
    """A database with every BSON type, indexes, a capped collection, a validator, a
    view and a time-series collection (20 measurements in two buckets); its URI."""
    db.items.insert_many([{"_id": i, "n": i, **EVERY_TYPE} for i in range(300)])
    db.items.create_index([("n", -1)], name="n_down")
    db.items.create_index(
        [("n", 1), ("int32", 1)], unique=True, partialFilterExpression={"n": {"$gt": 5}}
    )
    db.create_collection("log", capped=True, size=65536, max=50)
    db.log.insert_many([{"i": i} for i in range(60)])
    db.create_collection("checked", validator={"$jsonSchema": {"required": ["x"]}})
    db.checked.insert_one({"x": 1})
    db.command("create", "recent", viewOn="items", pipeline=[{"$match": {"n": {"$gte": 250}}}])
    db.create_collection("weather", timeseries={"timeField": "ts", "metaField": "station"})
    start = datetime.datetime(2024, 5, 1, 12, tzinfo=datetime.UTC)
    db.weather.insert_many(
        [
            {"ts": start + datetime.timedelta(minutes=i), "station": i % 2, "t": 20.5 + i}
            for i in range(20)
        ]
    )
    return f"mongodb://127.0.0.1:{server.port}"


def assert_restored(client, source, target) -> None:
    assert raw_documents(client[target].items) == raw_documents(client[source].items)
    assert raw_documents(client[target].log) == raw_documents(client[source].log)
    indexes = client[target].items.index_information()
    assert indexes["n_down"]["key"] == [("n", -1)]
    assert indexes["n_1_int32_1"]["unique"] is True
    assert indexes["n_1_int32_1"]["partialFilterExpression"] == {"n": {"$gt": 5}}
    log = client[target].log.options()
    assert log["capped"] is True and log["max"] == 50
    assert "$jsonSchema" in client[target].checked.options()["validator"]
    assert client[target].recent.count_documents({}) == 50
    # The time-series collection: its buckets as they were, so its measurements too.
    assert client[target].weather.options()["timeseries"]["metaField"] == "station"
    buckets = "system.buckets.weather"
    assert raw_documents(client[target][buckets]) == raw_documents(client[source][buckets])
    assert list(client[target].weather.find().sort("ts", 1)) == list(
        client[source].weather.find().sort("ts", 1)
    )
    assert (
        client[target].command("listCollections", filter={"name": "recent"})["cursor"][
            "firstBatch"
        ][0]["type"]
        == "view"
    )


@pytest.mark.parametrize("layout", ["directory", "gzip", "archive", "archive-gzip"])
def test_dump_and_restore_round_trip(client, db, shop, tmp_path, layout):
    target = f"{db.name}_r"
    client.drop_database(target)
    place = tmp_path / "dump"
    where = [f"--archive={place}"] if layout.startswith("archive") else [f"--out={place}"]
    gzip = ["--gzip"] if layout.endswith("gzip") else []
    basalt("dump", f"--uri={shop}", f"--db={db.name}", *where, *gzip, "--quiet")
    if layout == "directory":
        files = sorted(p.name for p in (place / db.name).iterdir())
        assert files == [
            "checked.bson", "checked.metadata.json", "items.bson", "items.metadata.json",
            "log.bson", "log.metadata.json", "recent.metadata.json",
            "system.buckets.weather.bson", "weather.metadata.json",
        ]  # fmt: skip
        # A time-series collection as mongodump writes it: its buckets' documents.
        weather = json.loads((place / db.name / "weather.metadata.json").read_text())
        assert weather["type"] == "timeseries" and weather["collectionName"] == "weather"
        buckets = (place / db.name / "system.buckets.weather.bson").read_bytes()
        assert buckets == b"".join(raw_documents(db["system.buckets.weather"]))
        metadata = json.loads((place / db.name / "items.metadata.json").read_text())
        assert metadata["collectionName"] == "items" and metadata["type"] == "collection"
        assert re.fullmatch(r"[0-9a-f]{32}", metadata["uuid"])
        # The .bson file is the documents' bytes, one after another.
        assert (place / db.name / "items.bson").read_bytes() == b"".join(raw_documents(db.items))
    where = [f"--archive={place}"] if layout.startswith("archive") else [str(place)]
    try:
        restored = basalt(
            "restore", f"--uri={shop}", *where, *gzip,
            f"--nsFrom={db.name}.*", f"--nsTo={target}.*",
        )  # fmt: skip
        assert b"353 document(s) restored successfully. 0 document(s) failed" in restored.stderr
        assert_restored(client, db.name, target)
        # --drop restores over what is there; without it, duplicates are failures.
        basalt("restore", f"--uri={shop}", *where, *gzip, f"--nsFrom={db.name}.*",
               f"--nsTo={target}.*", "--drop", "--quiet")  # fmt: skip
        assert_restored(client, db.name, target)
    finally:
        client.drop_database(target)


def test_archive_to_standard_output_and_back(client, db, shop):
    target = f"{db.name}_s"
    archive = basalt("dump", f"--uri={shop}", f"--db={db.name}", "--archive", "--quiet").stdout
    assert archive[:4] == bytes.fromhex("6de29981")
    try:
        basalt("restore", f"--uri={shop}", "--archive", f"--nsFrom={db.name}.*",
               f"--nsTo={target}.*", "--quiet", stdin=archive)  # fmt: skip
        assert_restored(client, db.name, target)
    finally:
        client.drop_database(target)


def test_namespace_selection(client, db, shop, tmp_path):
    basalt("dump", f"--uri={shop}", f"--nsInclude={db.name}.*", f"--nsExclude={db.name}.log",
           f"--out={tmp_path}", "--quiet")  # fmt: skip
    names = sorted(p.name for p in (tmp_path / db.name).iterdir())
    assert "log.bson" not in names and "items.bson" in names
    # Without a pattern naming them, the server's own databases are left out.
    assert not (tmp_path / "admin").exists() and not (tmp_path / "config").exists()
    target = f"{db.name}_one"
    try:
        basalt("restore", f"--uri={shop}", str(tmp_path), f"--nsInclude={db.name}.items",
               f"--nsFrom={db.name}.items", f"--nsTo={target}.things", "--quiet")  # fmt: skip
        assert client[target].list_collection_names() == ["things"]
        assert client[target].things.count_documents({}) == 300
    finally:
        client.drop_database(target)


def test_a_time_series_dump_takes_queries_on_its_meta_field(db, shop, tmp_path):
    """As mongodump: a --query on a time-series collection selects buckets by the meta
    field (which buckets hold as `meta`); a condition on anything else is refused."""
    out = tmp_path / "dump"
    basalt("dump", f"--uri={shop}", f"--db={db.name}", "--collection=weather",
           '--query={"station": 1}', f"--out={out}", "--quiet")  # fmt: skip
    dumped = bson.decode_all((out / db.name / "system.buckets.weather.bson").read_bytes())
    assert len(dumped) == 1 and dumped[0]["meta"] == 1
    done = subprocess.run(
        [str(default_binary()), "dump", f"--uri={shop}", f"--db={db.name}",
         "--collection=weather", '--query={"t": {"$gt": 0}}', f"--out={out}"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode != 0 and "only conditions on its metaField" in done.stderr


def test_older_time_series_dumps_restore(client, db, shop, tmp_path):
    """Basalt dumped a time-series collection's measurements before it dumped buckets:
    such a dump restores them into the collection."""
    out = tmp_path / "dump"
    basalt("dump", f"--uri={shop}", f"--db={db.name}", "--collection=weather", f"--out={out}",
           "--quiet")  # fmt: skip
    (out / db.name / "system.buckets.weather.bson").unlink()
    measurements = b"".join(raw_documents(db.weather))
    (out / db.name / "weather.bson").write_bytes(measurements)
    target = f"{db.name}_old"
    try:
        basalt("restore", f"--uri={shop}", str(out), f"--nsFrom={db.name}.*",
               f"--nsTo={target}.*", "--quiet")  # fmt: skip
        assert client[target].weather.options()["timeseries"]["timeField"] == "ts"
        assert raw_documents(client[target].weather) == raw_documents(db.weather)
    finally:
        client.drop_database(target)


def test_bad_input_gets_a_clear_error(shop, tmp_path):
    (tmp_path / "bad.archive").write_bytes(b"not an archive at all")
    done = subprocess.run(
        [str(default_binary()), "restore", f"--uri={shop}", f"--archive={tmp_path / 'bad.archive'}"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode != 0 and "not a valid archive" in done.stderr
    done = subprocess.run(
        [str(default_binary()), "dump", f"--uri={shop}", "--query={bad json", f"--out={tmp_path}"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode != 0 and "--query" in done.stderr
    # A .bson file cut short inside a document.
    (tmp_path / "cut" / "shop").mkdir(parents=True)
    (tmp_path / "cut" / "shop" / "items.bson").write_bytes(bson.encode({"a": 1})[:-3])
    done = subprocess.run(
        [str(default_binary()), "restore", f"--uri={shop}", str(tmp_path / "cut")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode != 0 and "damaged BSON: cut short" in done.stderr, done.stderr
    for args, said in [
        (["--type=csv"], "CSV export needs --fields"),
        (["--type=parquet"], "Parquet export needs --out"),
    ]:
        done = subprocess.run(
            [str(default_binary()), "export", f"--uri={shop}", "--collection=items", *args],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode != 0 and said in done.stderr, done.stderr


def export(uri: str, db: str, *args: str) -> str:
    return basalt("export", f"--uri={uri}", f"--db={db}", "--quiet", *args).stdout.decode()


def test_export_json_lines_array_and_csv(db, shop):
    lines = export(shop, db.name, "--collection=items", '--sort={"_id": 1}').splitlines()
    assert len(lines) == 300
    # Relaxed Extended JSON, read back to the same documents.
    first = bson.json_util.loads(lines[0])
    assert first == db.items.find_one({"_id": 0})
    canonical = export(shop, db.name, "--collection=items", "--jsonFormat=canonical",
                       "--query={\"n\": {\"$lt\": 2}}", "--sort={\"_id\": 1}")  # fmt: skip
    assert '"$numberInt":"42"' in canonical and len(canonical.splitlines()) == 2
    array = json.loads(export(shop, db.name, "--collection=items", "--jsonArray",
                              "--skip=10", "--limit=5", "--sort={\"_id\": 1}",
                              "--fields=n,doc.a"))  # fmt: skip
    assert [d["n"] for d in array] == [10, 11, 12, 13, 14]
    assert array[0] == {"_id": 10, "n": 10, "doc": {"a": {"b": [1, 2]}}}
    text = export(shop, db.name, "--collection=items", "--type=csv",
                  "--fields=_id,string,doc.a.b,oid,date,null,missing", "--limit=2",
                  "--sort={\"_id\": 1}")  # fmt: skip
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == ["_id", "string", "doc.a.b", "oid", "date", "null", "missing"]
    assert rows[1] == ["0", "héllo", "[1,2]", "ObjectId(5f1d7f3e9d3b2a1c0b0a0908)",
                       "2021-03-04T05:06:07.890Z", "", ""]  # fmt: skip
    assert len(rows) == 3


def test_files_pass_between_basalt_and_mongodb_tools(client, db, shop, tmp_path):
    mongodump, mongorestore = tool("mongodump"), tool("mongorestore")
    ours = tmp_path / "ours.archive"
    basalt("dump", f"--uri={shop}", f"--db={db.name}", f"--archive={ours}", "--gzip", "--quiet")
    theirs = tmp_path / "theirs"
    subprocess.run([mongodump, f"--uri={shop}", f"--db={db.name}", f"--out={theirs}", "--gzip"],
                   check=True, capture_output=True, timeout=120)  # fmt: skip
    for target, command in [
        (f"{db.name}_m", [mongorestore, f"--uri={shop}", f"--archive={ours}", "--gzip",
                          f"--nsFrom={db.name}.*", f"--nsTo={db.name}_m.*"]),
        (f"{db.name}_b", [str(default_binary()), "restore", f"--uri={shop}", str(theirs), "--gzip",
                          f"--nsFrom={db.name}.*", f"--nsTo={db.name}_b.*", "--quiet"]),
    ]:  # fmt: skip
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, done.stderr
            assert_restored(client, db.name, target)
        finally:
            client.drop_database(target)


def test_mongoimport_and_bsondump_read_what_basalt_writes(client, db, shop, tmp_path):
    """The two Database Tools the round trips above leave out: `mongoimport` loads
    `basalt export`'s canonical Extended JSON back with every type intact, and `bsondump`
    reads a `basalt dump` file document for document."""
    mongoimport, bsondump = tool("mongoimport"), tool("bsondump")
    exported = tmp_path / "items.json"
    basalt("export", f"--uri={shop}", f"--db={db.name}", "--collection=items",
           "--jsonFormat=canonical", f"--out={exported}", "--quiet")  # fmt: skip
    done = subprocess.run(
        [mongoimport, f"--uri={shop}", f"--db={db.name}", "--collection=imported",
         f"--file={exported}"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "300 document(s) imported successfully" in done.stderr
    assert raw_documents(db.imported) == raw_documents(db.items)

    dump = tmp_path / "dump"
    basalt("dump", f"--uri={shop}", f"--db={db.name}", "--collection=items", f"--out={dump}",
           "--quiet")  # fmt: skip
    done = subprocess.run(
        [bsondump, "--type=json", str(dump / db.name / "items.bson")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "300 objects found" in done.stderr
    options = bson.json_util.JSONOptions(json_mode=bson.json_util.JSONMode.CANONICAL)
    dumped = [bson.json_util.loads(line, json_options=options) for line in done.stdout.splitlines()]
    assert dumped == list(db.items.find().sort("_id", 1))


def test_export_parquet_read_back_by_duckdb(db, shop, tmp_path):
    import duckdb

    path = tmp_path / "items.parquet"
    basalt("export", f"--uri={shop}", f"--db={db.name}", "--collection=items", "--type=parquet",
           f"--out={path}", "--quiet")  # fmt: skip
    connection = duckdb.connect()
    relation = connection.sql(f"SELECT * FROM read_parquet('{path}') ORDER BY _id")
    columns = relation.columns
    rows = [dict(zip(columns, row, strict=True)) for row in relation.fetchall()]
    assert len(rows) == 300 and [r["n"] for r in rows] == list(range(300))
    types = dict(zip(columns, (str(t) for t in relation.types), strict=True))
    assert types["int32"] == "INTEGER" and types["int64"] == "BIGINT"
    assert types["double"] == "DOUBLE" and types["bool"] == "BOOLEAN"
    assert types["date"] == "TIMESTAMP WITH TIME ZONE" and types["binary"] == "BLOB"
    assert types["doc"] == "STRUCT(a STRUCT(b INTEGER[]))"
    row = rows[7]
    assert row["_id"] == 7
    assert row["double"] == 1.5 and row["string"] == "héllo" and row["bool"] is True
    assert row["int32"] == 42 and row["int64"] == 2**40
    assert row["doc"] == {"a": {"b": [1, 2]}}
    # Elements of several kinds: each element's relaxed Extended JSON.
    assert row["array"] == ["1", '"two"', '{"three":3}']
    assert row["binary"] == b"\x00\x01\xff"
    assert row["uuid"] == uuid.UUID("12345678-1234-5678-1234-567812345678").bytes
    assert row["oid"] == "5f1d7f3e9d3b2a1c0b0a0908" and row["decimal"] == "1.10"
    assert row["date"] == datetime.datetime(2021, 3, 4, 5, 6, 7, 890000, tzinfo=datetime.UTC)
    assert row["null"] is None
    assert json.loads(row["regex"]) == {"$regularExpression": {"pattern": "^a.*b$", "options": "i"}}
    assert json.loads(row["minkey"]) == {"$minKey": 1}
    assert json.loads(row["timestamp"]) == {"$timestamp": {"t": 1600000000, "i": 7}}
    total = connection.sql(f"SELECT sum(n), count(*) FROM read_parquet('{path}')").fetchall()
    assert total == [(sum(range(300)), 300)]


def test_export_parquet_of_a_large_collection_builds_row_groups_in_parallel(server, db, tmp_path):
    """Chunks of the cursor are dealt to a row-group builder per core: every document
    is written exactly once, in row groups of 65,536 rows at most."""
    import duckdb

    n = 150_000
    db.big.insert_many([{"_id": i, "n": i, "s": f"s{i % 7}"} for i in range(n)])
    path = tmp_path / "big.parquet"
    basalt("export", f"--uri={server.uri}", f"--db={db.name}", "--collection=big",
           "--type=parquet", f"--out={path}", "--quiet")  # fmt: skip
    connection = duckdb.connect()
    count, total, distinct = connection.sql(
        f"SELECT count(*), sum(n), count(DISTINCT _id) FROM read_parquet('{path}')"
    ).fetchall()[0]
    assert (count, total, distinct) == (n, sum(range(n)), n)
    groups = connection.sql(
        f"SELECT row_group_id, max(row_group_num_rows) FROM parquet_metadata('{path}') GROUP BY 1"
    ).fetchall()
    assert len(groups) >= 3 and all(rows <= 65_536 for _, rows in groups)


def test_oplog_dump_and_replay_on_a_replica_set(one_member_set, tmp_path):
    uri = one_member_set.uri
    client = one_member_set.client()
    shop = client.shop
    shop.items.insert_many([{"_id": i, "n": i} for i in range(50)])
    oplog = client.local["oplog.rs"]
    start = oplog.find_one(sort=[("$natural", -1)])["ts"]
    dump = tmp_path / "dump"
    basalt("dump", f"--uri={uri}", f"--out={dump}", "--oplog", "--quiet")
    assert (dump / "oplog.bson").exists()
    # Writes after the dump, kept as the oplog a dump running meanwhile would keep.
    shop.items.insert_many([{"_id": i, "n": i} for i in range(50, 60)])
    shop.items.update_one({"_id": 3}, {"$set": {"n": 300}, "$unset": {"x": 1}})
    shop.items.replace_one({"_id": 4}, {"whole": True})
    shop.items.delete_one({"_id": 5})
    with client.start_session() as session, session.start_transaction():
        shop.items.insert_one({"_id": "in a transaction"}, session=session)
        shop.items.update_one({"_id": 6}, {"$inc": {"n": 1}}, session=session)
    later = list(oplog.find({"ts": {"$gt": start}, "ns": {"$in": ["shop.items", "admin.$cmd"]}}))
    assert later
    (dump / "oplog.bson").write_bytes(b"".join(bson.encode(entry) for entry in later))
    restored = basalt("restore", f"--uri={uri}", str(dump), "--oplogReplay",
                      "--nsFrom=shop.*", "--nsTo=copy.*")  # fmt: skip
    assert b"replayed" in restored.stderr
    assert list(client.copy.items.find().sort("_id", 1)) == list(shop.items.find().sort("_id", 1))


def test_oplog_needs_a_whole_replica_set_dump(shop, tmp_path):
    for args in (["--oplog"], ["--oplog", "--db=shop"]):
        done = subprocess.run(
            [str(default_binary()), "dump", f"--uri={shop}", f"--out={tmp_path}", *args],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode != 0 and "--oplog" in done.stderr, done.stderr


def test_oplog_dumps_pass_between_basalt_and_mongodb_tools(one_member_set, tmp_path):
    mongodump, mongorestore = tool("mongodump"), tool("mongorestore")
    uri = one_member_set.uri
    client = one_member_set.client()
    client.shop.items.insert_many([{"_id": i} for i in range(100)])
    theirs, ours = tmp_path / "theirs.archive", tmp_path / "ours.archive"
    subprocess.run([mongodump, f"--uri={uri}", "--oplog", f"--archive={theirs}"],
                   check=True, capture_output=True, timeout=120)  # fmt: skip
    basalt("restore", f"--uri={uri}", f"--archive={theirs}", "--oplogReplay",
           "--nsFrom=shop.*", "--nsTo=copy.*", "--quiet")  # fmt: skip
    assert client.copy.items.count_documents({}) == 100
    basalt("dump", f"--uri={uri}", "--oplog", f"--archive={ours}", "--quiet")
    done = subprocess.run([mongorestore, f"--uri={uri}", f"--archive={ours}", "--oplogReplay",
                           "--drop"], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "applied" in done.stderr and client.shop.items.count_documents({}) == 100
