"""The official MongoDB Spark connector (10.x) with PySpark, end to end against Basalt.

This is how users take a collection past one machine for analytics: Spark reads it in
parallel partitions (the connector's default partitioner buckets a sample of `_id`s
with `$bucketAuto`, then each partition is an aggregation with a `$match` on an `_id`
range), pushes DataFrame
filters down as `$match`, and writes DataFrames back with inserts. The test loads
W1-shaped documents (UK vehicle tests, SPARK_TEST_DOCS of them, 1 M by default), reads
them through the connector, checks every figure against what the generator computed,
checks on the server's profiler that the filter arrived as `$match`, and writes a
filtered DataFrame back.

Run by `make spark-test`, which installs PySpark (tests/spark/requirements.txt) and the
connector's jars (tests/spark/pom.xml, from Maven Central) first.
"""

from __future__ import annotations

import os
import random
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from basalt_server import BasaltServer, default_binary  # noqa: E402

pyspark_sql = pytest.importorskip("pyspark.sql")

DOCS = int(os.environ.get("SPARK_TEST_DOCS", "1000000"))
JARS = Path(__file__).resolve().parent / "target" / "jars"
DB = "spark"
FUELS = ["PE", "DI", "HY", "EL", "LP"]
MAKES = ["FORD", "VAUXHALL", "VOLKSWAGEN", "BMW", "TOYOTA", "NISSAN", "AUDI", "KIA"]
INSERT_BATCH = 10_000


def w1_documents(count: int, totals: dict, seed: int = 7):
    """W1-shaped vehicle tests, in batches; `totals` gets per fuel type [tests, miles]."""
    rng = random.Random(seed)
    start = datetime(2020, 1, 1, tzinfo=timezone.utc)
    totals.update({fuel: [0, 0] for fuel in FUELS})
    batch = []
    for i in range(count):
        fuel = rng.choice(FUELS)
        miles = rng.randrange(500, 200_000)
        totals[fuel][0] += 1
        totals[fuel][1] += miles
        batch.append(
            {
                "_id": 1_000_000_000 + i,
                "vehicle_id": rng.randrange(1, 2_000_000_000),
                "test_date": start + timedelta(days=rng.randrange(730)),
                "test_result": rng.choice("PPPF"),
                "test_mileage": miles,
                "make": rng.choice(MAKES),
                "fuel_type": fuel,
                "cylinder_capacity": 0 if fuel == "EL" else rng.choice([998, 1398, 1598, 1968]),
            }
        )
        if len(batch) == INSERT_BATCH:
            yield batch
            batch = []
    yield batch


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    """A server holding DOCS W1 documents in spark.w1, and the generator's figures."""
    base = tmp_path_factory.mktemp("spark")
    server = BasaltServer(default_binary(), base / "db", base / "server.log").start()
    client = server.client()
    totals = {}
    for batch in w1_documents(DOCS, totals):
        if batch:
            client[DB].w1.insert_many(batch, ordered=False)
    yield server, client, totals
    server.stop()


@pytest.fixture(scope="module")
def spark():
    jars = sorted(str(jar) for jar in JARS.glob("*.jar"))
    if not jars:
        pytest.fail(f"no connector jars in {JARS}: run `make spark-test`, which fetches them")
    session = (
        pyspark_sql.SparkSession.builder.master("local[2]")
        .appName("basalt-spark-connector-test")
        .config("spark.jars", ",".join(jars))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def read(spark, server, collection: str):
    return (
        spark.read.format("mongodb")
        .option("connection.uri", server.uri)
        .option("database", DB)
        .option("collection", collection)
        # The default partitioner (AutoBucketPartitioner: $collStats, then $sample and
        # $bucketAuto over _id), with chunks of 4 MB instead of 64, so that a smaller
        # SPARK_TEST_DOCS still makes several partitions.
        .option("partitioner.options.chunkSize", "4")
        .load()
    )


def test_spark_reads_in_partitions_filters_on_the_server_and_writes_back(loaded, spark):
    server, client, totals = loaded
    client[DB].command("profile", 2)
    frame = read(spark, server, "w1")

    # The default partitioner splits the collection into several _id ranges.
    partitions = frame.rdd.getNumPartitions()
    assert partitions > 1, "the connector read the collection as one partition"

    # Every document, once: count and per fuel type tests and miles.
    started = time.monotonic()
    rows = frame.groupBy("fuel_type").agg({"*": "count", "test_mileage": "sum"}).collect()
    elapsed = time.monotonic() - started
    figures = {row["fuel_type"]: [row["count(1)"], row["sum(test_mileage)"]] for row in rows}
    assert figures == {fuel: tests_miles for fuel, tests_miles in totals.items() if tests_miles[0]}
    print(f"\nread {DOCS} documents in {partitions} partitions in {elapsed:.1f} s")

    # A filter reaches the server as $match: Spark's plan keeps no filter of its own,
    # and the server's profiler saw the partitions' aggregations carry it.
    diesel = frame.filter(frame.fuel_type == "DI").select("_id", "test_mileage", "make")
    plan = diesel._jdf.queryExecution().executedPlan().toString()
    assert "Filter [" not in plan and "Filter (" not in plan, plan
    assert diesel.count() == totals["DI"][0]
    pushed = [
        entry["command"]["pipeline"]
        for entry in client[DB].system.profile.find({"op": "command", "command.aggregate": "w1"})
        if any(
            "fuel_type" in str(stage.get("$match", {})) and "DI" in str(stage.get("$match", {}))
            for stage in entry["command"].get("pipeline", [])
        )
    ]
    assert pushed
    # The connector's partitioner samples the filtered documents, then reads each _id
    # range (when there are several) with the filter beside the range.
    ranged = [pipeline for pipeline in pushed if "_id" in str(pipeline)]
    assert len(ranged) >= diesel.rdd.getNumPartitions() - 1, pushed
    print(f"filtered read: {diesel.rdd.getNumPartitions()} partitions, e.g. {ranged[-1:]}")

    # A DataFrame written back: the documents arrive whole, once.
    diesel.write.format("mongodb").mode("append").option("connection.uri", server.uri).option(
        "database", DB
    ).option("collection", "diesel").save()
    written = list(
        client[DB].diesel.aggregate(
            [{"$group": {"_id": None, "n": {"$sum": 1}, "miles": {"$sum": "$test_mileage"}}}]
        )
    )
    assert written == [{"_id": None, "n": totals["DI"][0], "miles": totals["DI"][1]}]

    # And read again through Spark, with a filter on a range of _ids.
    again = read(spark, server, "diesel")
    lowest = again.filter(again["_id"] < 1_000_000_000 + 1000).count()
    assert lowest == sum(
        1 for doc in client[DB].w1.find({"_id": {"$lt": 1_000_000_000 + 1000}, "fuel_type": "DI"})
    )
