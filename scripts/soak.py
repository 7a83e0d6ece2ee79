"""Soak test: normal traffic beside hostile queries, against one private server.

For `--duration` seconds (10 minutes by default), `--clients` threads (20) talk to a
`basalt` process started here on 127.0.0.1 with a small block cache and an operations
memory budget. Most threads are applications: they insert (acknowledged, every `_id`
remembered), read by `_id`, update and aggregate, and time each operation. The others
are hostile: value bombs, sorts too large for memory without `allowDiskUse`, deep and
too long pipelines, JavaScript that loops or eats its heap, `$push` and `$lookup` bombs, idle
cursors holding sort buffers, and floods of connections opened at once.

The run fails unless: the server process is the same at the end (it never restarted or
died), its resident memory never passed the configured memory (block cache + operation
budget + a fixed allowance for everything else), no panic was logged, every hostile
query failed with one of MongoDB's errors rather than a dropped connection, and every
acknowledged insert is there at the end. It prints the normal traffic's latencies
(p50/p99/max per operation), the peak resident memory, and the hostile queries' error
codes, and writes them as JSON with `--json`.

    .venv/bin/python scripts/soak.py --binary ~/.cache/basalt-target/release/basalt
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

from pymongo.errors import AutoReconnect, ConnectionFailure, OperationFailure

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "e2e"))
import wire  # noqa: E402
from basalt_server import BasaltServer, default_binary  # noqa: E402
from helpers import doubling, unwound  # noqa: E402

MB = 1024 * 1024
CACHE_GB = 0.25
BUDGET_MB = 1024
# What the process holds beyond the block cache and the operations' budget: code and
# memtables (~100 MB), the connections' threads (~100 KB each; the floods open up to
# 2,400 at once), and the free pages mimalloc keeps for a while in the heaps of the
# threads that freed them (a connection thread that ran a large query and then waits for
# its next request keeps them: measured at 0.5-1 GB here, 0.3 GB with
# MIMALLOC_PURGE_DELAY=0, which costs W1/W2 25-35 %).
ALLOWANCE_MB = 1536
# The longest a single request may take before the run calls the server stuck.
REQUEST_TIMEOUT_MS = 120_000


def deep_expression(levels):
    expression = "$v"
    for _ in range(levels):
        expression = {"$add": [expression, 1]}
    return expression


# Hostile queries that are legal, only expensive: they may succeed.
MAY_SUCCEED = {"deep pipeline"}

# Each hostile query: a name and a function of a collection that runs it.
HOSTILE = {
    "string bomb": lambda c: list(
        c.aggregate([{"$project": {"x": doubling("$s", {"$concat": ["$$value", "$$value"]})}}])
    ),
    "array bomb": lambda c: list(
        c.aggregate([{"$project": {"x": doubling([1], {"$concatArrays": ["$$value", "$$value"]})}}])
    ),
    "object bomb": lambda c: list(
        c.aggregate([{"$project": {"x": doubling({"a": 1}, {"a": "$$value", "b": "$$value"})}}])
    ),
    "depth bomb": lambda c: list(
        c.aggregate([{"$project": {"x": doubling([], ["$$value"], times=100_000)}}])
    ),
    "range bomb": lambda c: list(
        c.aggregate([{"$project": {"x": {"$range": [0, 2_000_000_000]}}}])
    ),
    "huge sort without disk": lambda c: list(
        c.aggregate([*unwound(150), {"$sort": {"n": -1}}], allowDiskUse=False)
    ),
    "push bomb": lambda c: list(
        c.aggregate([*unwound(120), {"$group": {"_id": None, "all": {"$push": "$s"}}}])
    ),
    "lookup bomb": lambda c: list(
        c.aggregate(
            [{"$lookup": {"pipeline": [{"$documents": [{"i": 0}]}, *unwound(110)], "as": "j"}}]
        )
    ),
    "too long a pipeline": lambda c: list(c.aggregate([{"$addFields": {"v": 1}}] * 1001)),
    "deep pipeline": lambda c: list(
        c.aggregate([{"$addFields": {"v": deep_expression(90)}}] * 1000)
    ),
    "javascript loop": lambda c: list(c.find({"$where": "while (true) {}"}).max_time_ms(2000)),
    "javascript heap": lambda c: list(
        c.find({"$where": "var a = []; while (true) { a.push('x'.repeat(1 << 20)); }"})
    ),
}


def connection_flood(port, count, hold_s):
    """Opens `count` connections at once, says hello on each, holds them, closes them."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            s.sendall(wire.op_msg({"hello": 1, "$db": "admin"}))
            sockets.append(s)
        answered = 0
        for s in sockets:
            try:
                if s.recv(16):
                    answered += 1
            except OSError:
                pass
        time.sleep(hold_s)
        return answered
    finally:
        for s in sockets:
            s.close()


class Run:
    """What the threads record, under one lock."""

    def __init__(self):
        self.lock = threading.Lock()
        self.latencies = collections.defaultdict(list)
        self.acknowledged = []
        self.hostile = collections.Counter()
        self.failures = []
        self.flood_connections = 0

    def record(self, kind, seconds):
        with self.lock:
            self.latencies[kind].append(seconds)

    def fail(self, message):
        with self.lock:
            self.failures.append(message)


def application(client, run, stop, seed):
    """Normal traffic: inserts, point reads, updates and small aggregations, timed."""
    rng = random.Random(seed)
    coll = client.soak.app
    mine = []
    while not stop.is_set():
        kind = rng.choice(["insert", "insert", "find", "update", "aggregate"])
        start = time.perf_counter()
        try:
            if kind == "insert":
                doc = {"_id": f"{seed}-{len(mine)}", "k": rng.randrange(100), "v": rng.random()}
                coll.insert_one(doc)
                mine.append(doc["_id"])
                with run.lock:
                    run.acknowledged.append(doc["_id"])
            elif kind == "find" and mine:
                if coll.find_one({"_id": rng.choice(mine)}) is None:
                    run.fail(f"an acknowledged insert was not found by {kind}")
            elif kind == "update" and mine:
                coll.update_one({"_id": rng.choice(mine)}, {"$inc": {"n": 1}})
            elif kind == "aggregate":
                list(
                    coll.aggregate(
                        [
                            {"$match": {"k": rng.randrange(100)}},
                            {"$group": {"_id": None, "n": {"$sum": 1}}},
                        ]
                    )
                )
            else:
                continue
        except (OperationFailure, ConnectionFailure) as e:
            run.fail(f"normal {kind} failed: {e}")
            continue
        run.record(kind, time.perf_counter() - start)


def hostile(client, port, run, stop, seed):
    """Hostile traffic: every query must fail with a MongoDB error, the server living on."""
    rng = random.Random(seed)
    coll = client.soak.hostile
    idle_cursors = []
    while not stop.is_set():
        name = rng.choice([*HOSTILE, "idle cursor", "connection flood"])
        try:
            if name == "connection flood":
                answered = connection_flood(port, 400, hold_s=1.0)
                with run.lock:
                    run.flood_connections += answered
                run.hostile[f"{name}: answered"] += 1
                continue
            if name == "idle cursor":
                # A sort of 40 MB that may spill, left open after one document.
                cursor = coll.aggregate([*unwound(40), {"$sort": {"n": -1}}], batchSize=1)
                next(cursor)
                idle_cursors.append(cursor)
                if len(idle_cursors) > 3:
                    idle_cursors.pop(0).close()
                run.hostile[f"{name}: held"] += 1
                continue
            HOSTILE[name](coll)
            if name in MAY_SUCCEED:
                run.hostile[f"{name}: ok"] += 1
            else:
                run.fail(f"hostile query {name!r} succeeded")
        except OperationFailure as e:
            run.hostile[f"{name}: {e.details.get('codeName', e.code)}"] += 1
        except (AutoReconnect, ConnectionFailure) as e:
            run.fail(f"hostile query {name!r} lost its connection: {e}")
    for cursor in idle_cursors:
        cursor.close()


def resident_mb(pid):
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except FileNotFoundError:
        return None
    return None


def percentile(values, p):
    ordered = sorted(values)
    if not ordered:
        return None
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def soak(binary, duration_s, clients, hostile_clients, workdir):
    server = BasaltServer(
        binary,
        workdir / "data",
        workdir / "basalt.log",
        extra_args=[
            "--cacheSizeGB",
            str(CACHE_GB),
            "--setParameter",
            f"operationMemoryBudgetMB={BUDGET_MB}",
        ],
    ).start()
    pid = server.proc.pid
    limit_mb = CACHE_GB * 1024 + BUDGET_MB + ALLOWANCE_MB
    run = Run()
    stop = threading.Event()
    resident = []
    budget_peak_mb = None
    try:
        setup = server.client()
        setup.soak.hostile.insert_one({"_id": 1, "s": "ab", "v": 1})
        threads = []
        for i in range(clients):
            client = server.client(
                socketTimeoutMS=REQUEST_TIMEOUT_MS,
                maxPoolSize=2,
                retryWrites=False,
                retryReads=False,
            )
            if i < hostile_clients:
                target, args = hostile, (client, server.port, run, stop, i)
            else:
                target, args = application, (client, run, stop, i)
            threads.append(threading.Thread(target=target, args=args, daemon=True))
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + duration_s
        while time.monotonic() < deadline:
            mb = resident_mb(pid)
            if mb is None or not server.is_alive():
                run.fail("the server process ended during the run")
                break
            resident.append(mb)
            time.sleep(0.5)
        stop.set()
        for thread in threads:
            thread.join(REQUEST_TIMEOUT_MS / 1000)
            if thread.is_alive():
                run.fail("a client thread did not finish: a request hung")
        if not server.is_alive() or server.proc.pid != pid:
            run.fail("the server is not the process that started the run")
        else:
            acknowledged = set(run.acknowledged)
            present = {d["_id"] for d in setup.soak.app.find({}, {"_id": 1})}
            missing = acknowledged - present
            if missing:
                run.fail(
                    f"{len(missing)} acknowledged inserts are missing, e.g. {sorted(missing)[:3]}"
                )
        if server.panics():
            run.fail("the server logged a panic: " + server.panics()[0])
        if server.is_alive():
            budget = setup.admin.command("serverStatus")["basalt"]["memory"]
            budget_peak_mb = budget["operationBytesPeak"] / MB
    finally:
        stop.set()
        server.stop()
    peak = max(resident, default=0.0)
    if peak > limit_mb:
        run.fail(f"resident memory reached {peak:.0f} MB, past the configured {limit_mb:.0f} MB")
    latencies = {
        kind: {
            "count": len(values),
            "p50_ms": round(percentile(values, 50) * 1000, 3),
            "p99_ms": round(percentile(values, 99) * 1000, 3),
            "max_ms": round(max(values) * 1000, 3),
        }
        for kind, values in sorted(run.latencies.items())
    }
    everything = [v for values in run.latencies.values() for v in values]
    return {
        "duration_s": duration_s,
        "clients": clients,
        "hostile_clients": hostile_clients,
        "configured_memory_mb": limit_mb,
        "peak_resident_mb": round(peak, 1),
        "budget_peak_mb": budget_peak_mb and round(budget_peak_mb, 1),
        "acknowledged_inserts": len(run.acknowledged),
        "normal_operations": len(everything),
        "normal_p99_ms": round(percentile(everything, 99) * 1000, 3) if everything else None,
        "latencies": latencies,
        "hostile": dict(sorted(run.hostile.items())),
        "flood_connections_answered": run.flood_connections,
        "failures": run.failures[:20],
        "passed": not run.failures,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", type=Path, default=default_binary())
    parser.add_argument("--duration", type=float, default=600.0, help="seconds (default 600)")
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--hostile", type=int, default=6, help="how many clients are hostile")
    parser.add_argument("--json", type=Path, help="also write the summary here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="basalt-soak-") as tmp:
        summary = soak(args.binary, args.duration, args.clients, args.hostile, Path(tmp))
    text = json.dumps(summary, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0 if summary["passed"] else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
