"""Failover trials, bounded in time, traffic only on 127.0.0.1: a three-member replica set
serves client threads doing retryable, majority-acknowledged inserts, compare-and-set
increments (findAndModify) on a few counters and linearizable reads, while a nemesis
kills the primary (`kill -9`) or pauses it (SIGSTOP, then SIGCONT) once per trial.

Each trial reports the client operations that failed, the acknowledged inserts that are
missing afterwards, whether every counter holds each acknowledged increment exactly once
(none lost, none applied twice; an increment whose call failed may or may not count),
and the time from the fault to the first acknowledged insert that was sent after it.
Results go to --out as JSON.

    scripts/failover.py --binary target/release/basalt --trials 20
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "e2e"))

import pymongo  # noqa: E402
from pymongo.read_concern import ReadConcern  # noqa: E402

from basalt_server import ReplicaSet, default_binary  # noqa: E402

THREADS = 4
COUNTERS = 3
PAUSE_S = 4.0
SETTLE_S = 1.0
TRIAL_LIMIT_S = 30.0


class Workload:
    """Client threads recording what was acknowledged and what failed."""

    def __init__(self, client: pymongo.MongoClient, trial: int):
        self.db = client.get_database("failover", read_concern=ReadConcern("majority"))
        self.trial = trial
        self.stop = threading.Event()
        self.lock = threading.Lock()
        # (sent, acknowledged, thread, seq) of each acknowledged insert.
        self.acked_inserts: list[tuple[float, float, int, int]] = []
        self.increments = [0] * COUNTERS
        # Increments whose outcome the client does not know (the call failed).
        self.unknown_increments = [0] * COUNTERS
        self.failures: list[str] = []
        self.threads = [threading.Thread(target=self.run, args=(t,)) for t in range(THREADS)]

    def run(self, thread: int) -> None:
        seq = 0
        linearizable = self.db.get_collection("counters", read_concern=ReadConcern("linearizable"))
        while not self.stop.is_set():
            key = seq % COUNTERS
            incrementing = False
            try:
                sent = time.monotonic()
                self.db.events.insert_one({"trial": self.trial, "thread": thread, "seq": seq})
                with self.lock:
                    self.acked_inserts.append((sent, time.monotonic(), thread, seq))
                incrementing = True
                self.db.counters.find_one_and_update({"_id": key}, {"$inc": {"n": 1}}, upsert=True)
                incrementing = False
                with self.lock:
                    self.increments[key] += 1
                linearizable.find_one({"_id": key})
            except pymongo.errors.PyMongoError as exc:
                with self.lock:
                    self.failures.append(f"{type(exc).__name__}: {exc}"[:300])
                    if incrementing:
                        self.unknown_increments[key] += 1
            seq += 1

    def __enter__(self) -> Workload:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(TRIAL_LIMIT_S)


def run_trial(cluster: ReplicaSet, client: pymongo.MongoClient, trial: int, fault: str) -> dict:
    client.failover.counters.delete_many({})
    with Workload(client, trial) as work:
        time.sleep(SETTLE_S)
        primary = cluster.wait_for_primary()
        if fault == "kill":
            primary.kill()
        else:
            os.kill(primary.proc.pid, signal.SIGSTOP)
        # After the fault took hold (a killed process has been reaped): an insert sent
        # from now on can only be acknowledged by another member.
        faulted_at = time.monotonic()
        deadline = faulted_at + TRIAL_LIMIT_S
        first_ack = None
        while time.monotonic() < deadline and first_ack is None:
            with work.lock:
                after = [acked for sent, acked, _, _ in work.acked_inserts if sent > faulted_at]
            first_ack = min(after) - faulted_at if after else None
            time.sleep(0.005)
        if fault == "pause":
            time.sleep(max(0.0, PAUSE_S - (time.monotonic() - faulted_at)))
            os.kill(primary.proc.pid, signal.SIGCONT)
        time.sleep(SETTLE_S)
    if fault == "kill":
        primary.start()
    stored = {
        (d["thread"], d["seq"])
        for d in client.failover.events.find({"trial": trial}, {"thread": 1, "seq": 1})
    }
    lost = [(t, s) for _, _, t, s in work.acked_inserts if (t, s) not in stored]
    counters = {d["_id"]: d["n"] for d in client.failover.counters.find()}
    # Each counter holds every acknowledged increment once; an increment whose call
    # failed may or may not be there (its outcome is unknown to the client).
    counters_exact = all(
        work.increments[k] <= counters.get(k, 0) <= work.increments[k] + work.unknown_increments[k]
        for k in range(COUNTERS)
    )
    return {
        "trial": trial,
        "fault": fault,
        "acknowledged_inserts": len(work.acked_inserts),
        "failed_operations": len(work.failures),
        "failures": work.failures[:5],
        "lost_acknowledged_writes": len(lost),
        "counters_exact": counters_exact,
        "counters": {str(k): [counters.get(k, 0), work.increments[k]] for k in range(COUNTERS)},
        "first_write_after_fault_s": first_ack,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", type=Path, default=default_binary())
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--out", type=Path, default=Path("failover-results.json"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="basalt-failover-") as directory:
        cluster = ReplicaSet(args.binary, Path(directory), 3)
        cluster.start()
        # A paused primary keeps its connections open: without a socket timeout an
        # operation in flight would wait for SIGCONT. With one, it fails over as after a
        # kill (a timed-out retryable write is retried once on the new primary).
        client = cluster.client(
            retryWrites=True, retryReads=True, w="majority", socketTimeoutMS=2_000
        )
        results = []
        try:
            for trial in range(args.trials):
                fault = "kill" if trial % 2 == 0 else "pause"
                result = run_trial(cluster, client, trial, fault)
                results.append(result)
                print(json.dumps({k: v for k, v in result.items() if k != "failures"}), flush=True)
        finally:
            cluster.kill()
    times = [r["first_write_after_fault_s"] for r in results if r["first_write_after_fault_s"]]
    summary = {
        "trials": len(results),
        "failed_operations": sum(r["failed_operations"] for r in results),
        "lost_acknowledged_writes": sum(r["lost_acknowledged_writes"] for r in results),
        "counters_exact_in_every_trial": all(r["counters_exact"] for r in results),
        "first_write_after_fault_median_s": statistics.median(times) if times else None,
        "first_write_after_fault_max_s": max(times) if times else None,
        "trials_without_a_write_after_fault": sum(
            1 for r in results if r["first_write_after_fault_s"] is None
        ),
    }
    args.out.write_text(json.dumps({"summary": summary, "trials": results}, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    ok = (
        summary["failed_operations"] == 0
        and summary["lost_acknowledged_writes"] == 0
        and summary["counters_exact_in_every_trial"]
        and summary["trials_without_a_write_after_fault"] == 0
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
