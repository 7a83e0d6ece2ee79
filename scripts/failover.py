"""Fault trials in the style of Jepsen, bounded in time, traffic only on 127.0.0.1: a
three-member replica set serves client threads doing retryable, majority-acknowledged
inserts and, on a few keys, writes, compare-and-sets (findAndModify) and linearizable
reads, while a nemesis faults the primary once per trial, in turn:

- kill: `kill -9`, restarted after the trial;
- pause: SIGSTOP, then SIGCONT after 4 s;
- isolate: the members' links to and from it cut for 4 s (a fault-injecting proxy sits
  between every two members; clients still reach all of them);
- partial: its link with one secondary cut for 4 s (it keeps a majority).

Each trial reports the client operations that failed, the acknowledged inserts that are
missing afterwards, the time from the fault to the first acknowledged insert that was
sent after it, and the time until another member says it is primary (asked directly
every 10 ms: the server's failover, apart from what the driver takes to notice). The
keys' histories (every operation's call and return on one clock, and what it saw) are
checked for linearizability by Porcupine (`tools/linearizability`, a Go program; needs
`go`). Results go to --out as JSON, the histories beside it.

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
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "e2e"))

import pymongo  # noqa: E402
from pymongo.read_concern import ReadConcern  # noqa: E402

from basalt_server import ReplicaSet, default_binary  # noqa: E402
from helpers import reader_of  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FAULTS = ["kill", "pause", "isolate", "partial"]
THREADS = 4
KEYS = ["k0", "k1", "k2"]
FAULT_S = 4.0
SETTLE_S = 1.0
TRIAL_LIMIT_S = 30.0


class Workload:
    """Client threads recording what was acknowledged, what failed, and the keys'
    history."""

    def __init__(self, client: pymongo.MongoClient, trial: int):
        self.db = client.get_database("failover", read_concern=ReadConcern("majority"))
        self.trial = trial
        self.stop = threading.Event()
        self.lock = threading.Lock()
        # (sent, acknowledged, thread, seq) of each acknowledged insert.
        self.acked_inserts: list[tuple[float, float, int, int]] = []
        # The keys' operations, for the linearizability check.
        self.history: list[dict] = []
        self.failures: list[str] = []
        self.threads = [threading.Thread(target=self.run, args=(t,)) for t in range(THREADS)]

    def run(self, thread: int) -> None:
        seq = 0
        rng = random.Random(self.trial * 1000 + thread)
        registers = self.db.registers
        linearizable = self.db.get_collection("registers", read_concern=ReadConcern("linearizable"))
        # The last value this thread saw under each key: what its compare-and-sets expect.
        seen = dict.fromkeys(KEYS, 0)
        while not self.stop.is_set():
            try:
                sent = time.monotonic()
                self.db.events.insert_one({"trial": self.trial, "thread": thread, "seq": seq})
                with self.lock:
                    self.acked_inserts.append((sent, time.monotonic(), thread, seq))
            except pymongo.errors.PyMongoError as exc:
                self.failed(exc)
            key = rng.choice(KEYS)
            # Written values are unique, so a read names the write it saw.
            value = (thread + 1) * 1_000_000 + seq
            kind = rng.choice(["read", "write", "cas"])
            if kind == "cas" and seen[key] == 0:
                kind = "write"
            op = {"client": thread, "kind": kind, "key": key}
            call = time.monotonic_ns()
            try:
                if kind == "read":
                    doc = linearizable.find_one({"_id": key})
                    op["value"] = doc["v"] if doc else 0
                    seen[key] = op["value"]
                elif kind == "write":
                    registers.update_one({"_id": key}, {"$set": {"v": value}}, upsert=True)
                    op["value"] = value
                else:
                    op.update({"from": seen[key], "to": value})
                    swapped = registers.find_one_and_update(
                        {"_id": key, "v": seen[key]}, {"$set": {"v": value}}
                    )
                    op["ok"] = swapped is not None
                op["return"] = time.monotonic_ns()
            except pymongo.errors.PyMongoError as exc:
                self.failed(exc)
                if kind == "read":
                    # A failed read changed nothing: it is left out of the history.
                    op = None
                else:
                    op.setdefault("value", value)
                    op["unknown"] = True
            if op is not None:
                op["call"] = call
                with self.lock:
                    self.history.append(op)
            seq += 1

    def failed(self, exc: Exception) -> None:
        with self.lock:
            self.failures.append(f"{type(exc).__name__}: {exc}"[:300])

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
    client.failover.registers.delete_many({})
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
        index = cluster.members.index(primary)
        if fault == "kill":
            primary.kill()
        elif fault == "pause":
            os.kill(primary.proc.pid, signal.SIGSTOP)
            resume = threading.Timer(FAULT_S, os.kill, (primary.proc.pid, signal.SIGCONT))
        elif fault == "isolate":
            cluster.proxy.isolate(index)
            resume = threading.Timer(FAULT_S, cluster.proxy.heal)
        else:
            cluster.proxy.cut(index, (index + 1) % len(cluster.members))
            resume = threading.Timer(FAULT_S, cluster.proxy.heal)
        if resume is not None:
            resume.start()
        # After the fault took hold (a killed process has been reaped): an insert sent
        # from now on can only be acknowledged by another member.
        faulted_at = time.monotonic()
        faulted_wall = datetime.datetime.now(datetime.timezone.utc).isoformat()
        deadline = faulted_at + TRIAL_LIMIT_S
        # A partial cut leaves the primary a majority: no election is due.
        elected = None if fault == "partial" else elected_after(others, faulted_at, deadline)
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
    lost = missing(client, trial, work.acked_inserts)
    lost_details = []
    if lost:
        # Asked again a moment later, and of each member directly: a loss, or a stale
        # read?
        time.sleep(2)
        lost = missing(client, trial, work.acked_inserts)
        on_members = {
            m.port: missing(reader_of(m), trial, work.acked_inserts) if m.is_alive() else None
            for m in cluster.members
        }
        lost_details = [
            {
                "thread": t,
                "seq": s,
                "sent_after_fault_s": sent - faulted_at,
                "acked_after_fault_s": acked - faulted_at,
                "missing_on": [
                    port for port, gone in on_members.items() if gone and (t, s) in gone
                ],
            }
            for sent, acked, t, s in work.acked_inserts
            if (t, s) in set(lost)
        ]
    return {
        "trial": trial,
        "fault": fault,
        "acknowledged_inserts": len(work.acked_inserts),
        "failed_operations": len(work.failures),
        "failures": work.failures[:5],
        "lost_acknowledged_writes": len(lost),
        "lost": lost_details,
        "register_operations": len(work.history),
        "faulted_at": faulted_wall,
        "first_write_after_fault_s": first_ack,
        "new_primary_after_s": elected,
        "history": work.history,
    }


def missing(client: pymongo.MongoClient, trial: int, acked: list) -> list[tuple[int, int]]:
    """The acknowledged inserts of the trial that `client` does not find."""
    stored = {
        (d["thread"], d["seq"])
        for d in client.failover.events.find({"trial": trial}, {"thread": 1, "seq": 1})
    }
    return [(t, s) for _, _, t, s in acked if (t, s) not in stored]


def check_linearizability(histories: Path) -> list[dict] | None:
    """Porcupine's verdict on each trial's history (tools/linearizability), or None
    without a Go toolchain."""
    go = shutil.which("go")
    if go is None:
        print("linearizability: not checked, `go` is not installed", file=sys.stderr)
        return None
    checker = subprocess.run(
        [go, "run", ".", str(histories.resolve())],
        cwd=ROOT / "tools" / "linearizability",
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if checker.returncode not in (0, 1):
        print(f"linearizability: the checker failed: {checker.stderr}", file=sys.stderr)
        return None
    return [json.loads(line) for line in checker.stdout.splitlines() if line.strip()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", type=Path, default=default_binary())
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--out", type=Path, default=Path("failover-results.json"))
    parser.add_argument(
        "--faults",
        default=",".join(FAULTS),
        help=f"the faults to take in turn (default: {','.join(FAULTS)})",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        help="keep the members' data and logs in this directory (default: a temporary one)",
    )
    args = parser.parse_args()
    unknown = set(args.faults.split(",")) - set(FAULTS)
    if unknown:
        parser.error(f"unknown faults: {', '.join(sorted(unknown))}")
    with tempfile.TemporaryDirectory(prefix="basalt-failover-") as temporary:
        directory = args.keep or temporary
        cluster = ReplicaSet(args.binary, Path(directory), 3, partitionable=True)
        cluster.start()
        client = cluster.client(retryWrites=True, retryReads=True, w="majority")
        results = []
        try:
            for trial in range(args.trials):
                faults = args.faults.split(",")
                fault = faults[trial % len(faults)]
                result = run_trial(cluster, client, trial, fault)
                results.append(result)
                shown = {k: v for k, v in result.items() if k not in ("failures", "history")}
                print(json.dumps(shown), flush=True)
        finally:
            cluster.kill()
    histories = args.out.with_name(args.out.stem + "-histories.json")
    histories.write_text(
        json.dumps(
            [
                {"name": f"trial {r['trial']} ({r['fault']})", "operations": r.pop("history")}
                for r in results
            ]
        )
    )
    verdicts = check_linearizability(histories)
    for result, verdict in zip(results, verdicts or [], strict=False):
        result["linearizability"] = verdict["result"]
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
        "register_operations": sum(r["register_operations"] for r in results),
        "histories_linearizable": None
        if verdicts is None
        else sum(1 for v in verdicts if v["result"] == "Ok"),
        "histories_not_linearizable": None
        if verdicts is None
        else [v["name"] for v in verdicts if v["result"] == "Illegal"],
        "histories_unchecked_in_time": None
        if verdicts is None
        else [v["name"] for v in verdicts if v["result"] == "Unknown"],
        "first_write_after_fault_median_s": statistics.median(times) if times else None,
        "first_write_after_fault_max_s": max(times) if times else None,
        "first_write_after_kill": spread("kill", "first_write_after_fault_s"),
        "first_write_after_pause": spread("pause", "first_write_after_fault_s"),
        **{f"first_write_after_{f}": spread(f, "first_write_after_fault_s") for f in FAULTS[2:]},
        **{f"new_primary_after_{f}": spread(f, "new_primary_after_s") for f in FAULTS[:3]},
        "trials_without_a_write_after_fault": sum(
            1 for r in results if r["first_write_after_fault_s"] is None
        ),
    }
    args.out.write_text(json.dumps({"summary": summary, "trials": results}, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    ok = (
        summary["failed_operations"] == 0
        and summary["lost_acknowledged_writes"] == 0
        and verdicts is not None
        and summary["histories_linearizable"] == len(results)
        and summary["trials_without_a_write_after_fault"] == 0
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
