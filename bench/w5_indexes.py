"""W5 (DESIGN §7) index latencies through pymongo: 1 M weather observations (500
stations x 2000 timestamps, 12 h apart) with the index {ts: 1, st: 1}.

Measures a point query (one station at one time), one station over one year (730
documents) and the whole world at one moment (500 documents), checking every answer.
Starts its own server from BASALT_BIN (use a release build) on a scratch directory.

    BASALT_BIN=~/.cache/basalt-target/release/basalt .venv/bin/python bench/w5_indexes.py
"""

from __future__ import annotations

import datetime
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from pymongo import MongoClient

STATIONS = 500
TIMESTAMPS = 2000
STEP = datetime.timedelta(hours=12)
START = datetime.datetime(2020, 1, 1)
INSERT_BATCH_DOCS = 10_000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def timed(run, check, repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = run()
        times.append((time.perf_counter() - t0) * 1000)
        check(result)
    return times


def report(name: str, times: list[float]) -> None:
    times.sort()
    p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
    print(
        f"{name:<16} n={len(times):<6} median {statistics.median(times):8.3f} ms  p99 {p99:8.3f} ms"
    )


def main() -> None:
    binary = os.environ.get(
        "BASALT_BIN", os.path.expanduser("~/.cache/basalt-target/release/basalt")
    )
    port = free_port()
    with tempfile.TemporaryDirectory() as scratch:
        server = subprocess.Popen(
            [binary, "--port", str(port), "--bind_ip", "127.0.0.1", "--dbpath", scratch, "--quiet"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            client = MongoClient("127.0.0.1", port, serverSelectionTimeoutMS=10_000)
            client.admin.command("ping")
            coll = client.w5.obs
            rng = random.Random(5)
            t0 = time.perf_counter()
            batch = []
            for t in range(TIMESTAMPS):
                ts = START + STEP * t
                for st in range(STATIONS):
                    batch.append(
                        {"ts": ts, "st": st, "temp": rng.uniform(-30, 40), "q": rng.randrange(10)}
                    )
                    if len(batch) == INSERT_BATCH_DOCS:
                        coll.insert_many(batch, ordered=False)
                        batch = []
            if batch:
                coll.insert_many(batch, ordered=False)
            loaded = time.perf_counter() - t0
            t0 = time.perf_counter()
            coll.create_index([("ts", 1), ("st", 1)])
            built = time.perf_counter() - t0
            print(
                f"loaded {STATIONS * TIMESTAMPS} docs in {loaded:.1f} s, index built in {built:.1f} s"
            )

            def point():
                st, t = rng.randrange(STATIONS), rng.randrange(TIMESTAMPS)
                return st, t, coll.find_one({"ts": START + STEP * t, "st": st})

            def check_point(r):
                st, t, doc = r
                assert doc is not None and doc["st"] == st and doc["ts"] == START + STEP * t

            def station_year():
                st, first = rng.randrange(STATIONS), rng.randrange(TIMESTAMPS - 730)
                lo, hi = START + STEP * first, START + STEP * (first + 730)
                return st, list(coll.find({"st": st, "ts": {"$gte": lo, "$lt": hi}}))

            def check_station_year(r):
                st, docs = r
                assert len(docs) == 730 and all(d["st"] == st for d in docs)

            def world():
                t = rng.randrange(TIMESTAMPS)
                return t, list(coll.find({"ts": START + STEP * t}))

            def check_world(r):
                t, docs = r
                assert len(docs) == STATIONS and all(d["ts"] == START + STEP * t for d in docs)

            timed(point, check_point, 200)  # warm-up
            # The round trip of a command that does no work: the floor under every figure.
            report("ping", timed(lambda: client.admin.command("ping"), lambda r: None, 5000))
            report("point", timed(point, check_point, 5000))
            report("station-year", timed(station_year, check_station_year, 100))
            report("world-at-time", timed(world, check_world, 200))
            # Server-side view of one query of each kind (keys/docs examined, time).
            lo, hi = START + STEP * 100, START + STEP * 830
            for name, query in [
                ("point", {"ts": START + STEP * 7, "st": 3}),
                ("station-year", {"st": 3, "ts": {"$gte": lo, "$lt": hi}}),
                ("world-at-time", {"ts": START + STEP * 7}),
            ]:
                stats = coll.find(query).explain()["executionStats"]
                print(
                    f"{name:<16} server {stats['executionTimeMillis']} ms, "
                    f"keys {stats['totalKeysExamined']}, docs {stats['totalDocsExamined']}, "
                    f"returned {stats['nReturned']}"
                )
        finally:
            server.terminate()
            server.wait()


if __name__ == "__main__":
    sys.exit(main())
