"""Failover trials, bounded in time, traffic only on 127.0.0.1: a three-member replica set
serves client threads doing retryable, majority-acknowledged inserts, compare-and-set
increments (findAndModify) on a few counters and linearizable reads, while a nemesis
kills the primary (`kill -9`) or pauses it (SIGSTOP, then SIGCONT) once per trial.

Each trial reports the client operations that failed, the acknowledged inserts that are
missing afterwards, whether every counter holds each acknowledged increment exactly once
(none lost, none applied twice; an increment whose call failed may or may not count),
the time from the fault to the first acknowledged insert that was sent after it, and
the time until another member says it is primary (asked directly every 10 ms: the
server's failover, apart from what the driver takes to notice). Results go to --out as
JSON.

The clients use the driver's defaults (no socket timeout), as applications do: an
operation caught on a paused primary waits until it resumes, steps down and answers
NotWritablePrimary, then is retried on the new primary.

    scripts/failover.py --binary target/release/basalt --trials 20
"""

from __future__ import annotations

import argparse
import datetime
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


def elected_after(others: list, faulted_at: float, deadline: float) -> float | None:
    """Seconds from the fault until one of `others` (direct clients) says it is primary."""
    while time.monotonic() < deadline:
        for member in others:
            try:
                if member.admin.command("hello").get("isWritablePrimary"):
                    return time.monotonic() - faulted_at
            except pymongo.errors.PyMongoError:
                pass
        time.sleep(0.01)
    return None


def run_trial(cluster: ReplicaSet, client: pymongo.MongoClient, trial: int, fault: str) -> dict:
    client.failover.counters.delete_many({})
    with Workload(client, trial) as work:
        time.sleep(SETTLE_S)
        primary = cluster.wait_for_primary()
        others = [
            pymongo.MongoClient(
                f"mongodb://127.0.0.1:{m.port}/?directConnection=true",
                serverSelectionTimeoutMS=300,
                socketTimeoutMS=300,
            )
            for m in cluster.members
            if m is not primary
        ]
        resume = None
        if fault == "kill":
            primary.kill()
        else:
            os.kill(primary.proc.pid, signal.SIGSTOP)
            resume = threading.Timer(PAUSE_S, os.kill, (primary.proc.pid, signal.SIGCONT))
            resume.start()
        # After the fault took hold (a killed process has been reaped): an insert sent
        # from now on can only be acknowledged by another member.
        faulted_at = time.monotonic()
        faulted_wall = datetime.datetime.now(datetime.timezone.utc).isoformat()
        deadline = faulted_at + TRIAL_LIMIT_S
        elected = elected_after(others, faulted_at, deadline)
        for member in others:
            member.close()
        first_ack = None
        while time.monotonic() < deadline and first_ack is None:
            with work.lock:
                after = [acked for sent, acked, _, _ in work.acked_inserts if sent > faulted_at]
            first_ack = min(after) - faulted_at if after else None
            time.sleep(0.005)
        if resume is not None:
            resume.join()
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
        "faulted_at": faulted_wall,
        "first_write_after_fault_s": first_ack,
        "new_primary_after_s": elected,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", type=Path, default=default_binary())
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--out", type=Path, default=Path("failover-results.json"))
    parser.add_argument(
        "--keep",
        type=Path,
        help="keep the members' data and logs in this directory (default: a temporary one)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="basalt-failover-") as temporary:
        directory = args.keep or temporary
        cluster = ReplicaSet(args.binary, Path(directory), 3)
        cluster.start()
        client = cluster.client(retryWrites=True, retryReads=True, w="majority")
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

    def spread(fault: str, field: str) -> dict:
        values = [r[field] for r in results if r["fault"] == fault and r[field] is not None]
        if not values:
            return {}
        return {"median_s": statistics.median(values), "max_s": max(values)}

    summary = {
        "trials": len(results),
        "failed_operations": sum(r["failed_operations"] for r in results),
        "lost_acknowledged_writes": sum(r["lost_acknowledged_writes"] for r in results),
        "counters_exact_in_every_trial": all(r["counters_exact"] for r in results),
        "first_write_after_fault_median_s": statistics.median(times) if times else None,
        "first_write_after_fault_max_s": max(times) if times else None,
        "first_write_after_kill": spread("kill", "first_write_after_fault_s"),
        "first_write_after_pause": spread("pause", "first_write_after_fault_s"),
        "new_primary_after_kill": spread("kill", "new_primary_after_s"),
        "new_primary_after_pause": spread("pause", "new_primary_after_s"),
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
