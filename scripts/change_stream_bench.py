"""Change streams under load, on a local three-member replica set (traffic only on
127.0.0.1): the latency from a write's acknowledgement to its event reaching a watcher,
at a steady --rate of writes per second (inserts of --batch documents, majority
acknowledged); what an open stream costs W4-style puts (20 threads replacing documents
by _id) against the same set without a stream; and a load of --failover-docs documents
watched while the primary is killed half-way, the watcher resuming from its last token.

Checked: every acknowledged insert arrives exactly once, in order, in both runs. Writes the figures to
--out (JSON) and prints them.

    scripts/change_stream_bench.py --binary target/release/basalt --rate 10000
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "e2e"))

import pymongo  # noqa: E402
from pymongo import ReplaceOne  # noqa: E402

from basalt_server import ReplicaSet, default_binary  # noqa: E402

PUT_THREADS = 20
PUT_KEYS = 10_000


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def latency_run(client, rate: int, batch: int, seconds: float) -> dict:
    """Inserts `rate` documents a second in batches while a stream watches; returns the
    acknowledgement-to-event latencies."""
    coll = client.bench.events
    acked: dict[int, float] = {}
    delivered: dict[int, float] = {}
    order: list[int] = []
    done = threading.Event()
    stream = coll.watch(max_await_time_ms=100)

    def watch() -> None:
        while not done.is_set() or len(delivered) < len(acked):
            event = stream.try_next()
            if event is None:
                if done.is_set() and time.monotonic() > done_at[0] + 10:
                    return
                continue
            key = event["documentKey"]["_id"]
            delivered.setdefault(key, time.monotonic())
            order.append(key)

    done_at = [0.0]
    watcher = threading.Thread(target=watch)
    watcher.start()
    interval = batch / rate
    next_at = time.monotonic()
    key = 0
    deadline = next_at + seconds
    while time.monotonic() < deadline:
        docs = [{"_id": key + i, "v": key + i} for i in range(batch)]
        coll.insert_many(docs, ordered=True)
        now = time.monotonic()
        for doc in docs:
            acked[doc["_id"]] = now
        key += batch
        next_at += interval
        time.sleep(max(0.0, next_at - time.monotonic()))
    elapsed = seconds
    done_at[0] = time.monotonic()
    done.set()
    watcher.join()
    stream.close()
    latencies = [max(0.0, delivered[k] - acked[k]) * 1000 for k in acked if k in delivered]
    return {
        "target_writes_per_s": rate,
        "writes_per_s": round(len(acked) / elapsed),
        "acknowledged": len(acked),
        "delivered": len(delivered),
        "each_once_in_order": order == sorted(acked),
        "latency_p50_ms": round(statistics.median(latencies), 2),
        "latency_p99_ms": round(percentile(latencies, 0.99), 2),
        "latency_max_ms": round(max(latencies), 2),
    }


def failover_run(cluster, total: int, batch: int) -> dict:
    """Loads `total` documents in batches (retryable, majority) while a watcher reads
    their events; half-way the primary is killed (`kill -9`) and started again, and the
    watcher resumes from its last token on whichever member is primary. Every
    acknowledged insert must arrive exactly once, in order."""
    writer = cluster.client(w="majority", retryWrites=True)
    watcher_client = cluster.client(retryReads=True)
    acked: list[int] = []
    failed_batches: list[range] = []
    seen: list[int] = []
    resumes = [0]
    done = threading.Event()

    def watch() -> None:
        token = None
        idle_since = None
        while True:
            try:
                with watcher_client.bench.load.watch(
                    resume_after=token, max_await_time_ms=200, batch_size=1000
                ) as stream:
                    while True:
                        event = stream.try_next()
                        if event is None:
                            if done.is_set() and len(seen) >= len(acked):
                                return
                            idle_since = idle_since or time.monotonic()
                            if done.is_set() and time.monotonic() - idle_since > 30:
                                return
                            continue
                        idle_since = None
                        seen.append(event["documentKey"]["_id"])
                        token = stream.resume_token
            except pymongo.errors.PyMongoError:
                resumes[0] += 1
                time.sleep(0.1)

    watcher = threading.Thread(target=watch)
    watcher.start()
    time.sleep(0.5)
    killed_at = total // 2
    started = time.monotonic()
    for first in range(0, total, batch):
        ids = range(first, min(first + batch, total))
        if first >= killed_at and killed_at >= 0:
            victim = cluster.wait_for_primary()
            victim.kill()
            killed_at = -1
            threading.Timer(2.0, victim.start).start()
        try:
            writer.bench.load.insert_many([{"_id": i, "v": i} for i in ids])
            acked.extend(ids)
        except pymongo.errors.PyMongoError:
            failed_batches.append(ids)
    load_s = time.monotonic() - started
    done.set()
    watcher.join()
    unknown = {i for ids in failed_batches for i in ids}
    acknowledged = set(acked)
    return {
        "documents": total,
        "load_docs_per_s": round(total / load_s),
        "acknowledged": len(acked),
        "failed_batches": len(failed_batches),
        "stream_resumes": resumes[0],
        "events": len(seen),
        "duplicates": len(seen) - len(set(seen)),
        "in_order": seen == sorted(seen),
        "acknowledged_missing": len(acknowledged - set(seen)),
        "unexpected": len(set(seen) - acknowledged - unknown),
    }


def puts(client, seconds: float) -> float:
    """Puts a second by PUT_THREADS threads replacing random documents by _id."""
    coll = client.bench.w4
    counts = [0] * PUT_THREADS
    deadline = time.monotonic() + seconds

    def put(thread: int) -> None:
        rng = random.Random(thread)
        while time.monotonic() < deadline:
            key = rng.randrange(PUT_KEYS)
            coll.replace_one({"_id": key}, {"_id": key, "v": rng.random()}, upsert=True)
            counts[thread] += 1

    threads = [threading.Thread(target=put, args=(t,)) for t in range(PUT_THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(counts) / seconds


def drain(uri: str) -> None:
    """Reads a stream on the W4 collection until terminated (in its own process)."""
    client = pymongo.MongoClient(uri)
    with client.bench.w4.watch(max_await_time_ms=100) as stream:
        while True:
            stream.try_next()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", type=Path, default=default_binary())
    parser.add_argument("--rate", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument(
        "--failover-docs",
        type=int,
        default=1_000_000,
        help="documents of the load watched across a killed primary (0: skip)",
    )
    parser.add_argument("--out", type=Path, default=Path("change-stream-bench.json"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="basalt-cs-bench-") as directory:
        cluster = ReplicaSet(args.binary, Path(directory), 3).start()
        try:
            client = cluster.client(w="majority", maxPoolSize=64)
            latency = latency_run(client, args.rate, args.batch, args.seconds)
            client.bench.w4.bulk_write(
                [ReplaceOne({"_id": k}, {"_id": k, "v": 0}, upsert=True) for k in range(PUT_KEYS)]
            )
            without = puts(client, args.seconds)
            # The watcher runs in a process of its own, so that it does not take the
            # putting threads' interpreter lock.
            drainer = multiprocessing.Process(target=drain, args=(cluster.uri,), daemon=True)
            drainer.start()
            time.sleep(1)
            with_stream = puts(client, args.seconds)
            drainer.terminate()
            drainer.join()
            failover = (
                failover_run(cluster, args.failover_docs, 1_000) if args.failover_docs else None
            )
        finally:
            cluster.kill()
    summary = {
        "members": 3,
        "latency": latency,
        "w4_puts_per_s_without_stream": round(without),
        "w4_puts_per_s_with_stream": round(with_stream),
        "open_stream_cost": round(1 - with_stream / without, 3),
        "failover": failover,
    }
    args.out.write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    ok = latency["each_once_in_order"] and latency["delivered"] == latency["acknowledged"]
    if failover:
        ok = ok and failover["duplicates"] == 0 and failover["in_order"]
        ok = ok and failover["acknowledged_missing"] == 0 and failover["unexpected"] == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
