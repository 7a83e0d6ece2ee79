"""The bank test of multi-document transactions, bounded in time, traffic only on
127.0.0.1: a three-member replica set holds --accounts accounts; --threads client threads
move random amounts between two of them in transactions of four writes (debit, credit,
a record of the transfer, the thread's tally), retried on transient errors by pymongo's
`with_transaction`, while --readers threads read every balance in one snapshot
transaction. With --kill-primary the primary is killed (`kill -9`) half-way and started
again.

Checked at the end: every snapshot read saw the same total; the transfer records are
exactly the transfers the clients saw committed (none lost, none applied twice; one
whose commit outcome the client never learned may be there or not); each account's
balance is its opening balance plus the transfers recorded for it; each thread's tally
equals its records. Reported: committed transactions per second, the share of attempts
that were retried, and the latency of a committed transfer (p50, p99).

    scripts/bank.py --binary target/release/basalt --seconds 30 --kill-primary
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "e2e"))

from pymongo.errors import PyMongoError  # noqa: E402
from pymongo.read_concern import ReadConcern  # noqa: E402
from pymongo.write_concern import WriteConcern  # noqa: E402

from basalt_server import ReplicaSet, default_binary  # noqa: E402

OPENING_BALANCE = 1_000


class Bank:
    def __init__(self, client, accounts: int, deadline: float):
        self.client = client
        self.db = client.get_database("bank", write_concern=WriteConcern(w="majority"))
        self.accounts = accounts
        self.deadline = deadline
        self.lock = threading.Lock()
        self.committed: list[tuple[int, int]] = []  # (thread, seq) the client saw commit
        self.unknown: list[tuple[int, int]] = []  # transfers whose call failed
        self.latencies: list[float] = []
        self.attempts = 0
        self.totals: list[int] = []
        self.errors: list[str] = []

    def transfer(self, thread: int) -> None:
        rng = random.Random(thread)
        seq = 0
        with self.client.start_session() as session:
            while time.monotonic() < self.deadline:
                seq += 1
                a, b = rng.sample(range(self.accounts), 2)
                amount = rng.randint(1, 100)

                def move(s, a=a, b=b, amount=amount, seq=seq):
                    with self.lock:
                        self.attempts += 1
                    self.db.accounts.update_one(
                        {"_id": a}, {"$inc": {"balance": -amount}}, session=s
                    )
                    self.db.accounts.update_one(
                        {"_id": b}, {"$inc": {"balance": amount}}, session=s
                    )
                    self.db.transfers.insert_one(
                        {"_id": f"{thread}-{seq}", "from": a, "to": b, "amount": amount}, session=s
                    )
                    self.db.tallies.update_one(
                        {"_id": thread}, {"$inc": {"n": 1}}, upsert=True, session=s
                    )

                started = time.monotonic()
                try:
                    session.with_transaction(move)
                except PyMongoError as e:
                    with self.lock:
                        self.unknown.append((thread, seq))
                        self.errors.append(repr(e)[:300])
                    continue
                with self.lock:
                    self.committed.append((thread, seq))
                    self.latencies.append(time.monotonic() - started)

    def read_totals(self) -> None:
        with self.client.start_session() as session:
            while time.monotonic() < self.deadline:
                try:
                    with session.start_transaction(read_concern=ReadConcern("snapshot")):
                        total = sum(
                            d["balance"] for d in self.db.accounts.find({}, session=session)
                        )
                except PyMongoError as e:
                    if not getattr(e, "has_error_label", lambda _: False)(
                        "TransientTransactionError"
                    ):
                        with self.lock:
                            self.errors.append(repr(e)[:300])
                    continue
                with self.lock:
                    self.totals.append(total)


def check(bank: Bank) -> dict:
    db = bank.client.get_database("bank", read_concern=ReadConcern("majority"))
    records = {d["_id"]: d for d in db.transfers.find()}
    committed = {f"{t}-{s}" for t, s in bank.committed}
    unknown = {f"{t}-{s}" for t, s in bank.unknown}
    lost = committed - set(records)
    unexpected = set(records) - committed - unknown
    balances = {d["_id"]: d["balance"] for d in db.accounts.find()}
    expected = dict.fromkeys(range(bank.accounts), OPENING_BALANCE)
    for record in records.values():
        expected[record["from"]] -= record["amount"]
        expected[record["to"]] += record["amount"]
    tallies = {d["_id"]: d["n"] for d in db.tallies.find()}
    per_thread: dict[int, int] = {}
    for key in records:
        thread = int(key.split("-")[0])
        per_thread[thread] = per_thread.get(thread, 0) + 1
    return {
        "lost_committed_transfers": len(lost),
        "unexpected_transfers": len(unexpected),
        "balances_match_records": balances == expected,
        "tallies_match_records": tallies == per_thread,
        "total_now": sum(balances.values()),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", type=Path, default=default_binary())
    parser.add_argument("--accounts", type=int, default=1_000)
    parser.add_argument("--threads", type=int, default=20)
    parser.add_argument("--readers", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--kill-primary", action="store_true")
    parser.add_argument("--out", type=Path, default=Path("bank-results.json"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="basalt-bank-") as directory:
        cluster = ReplicaSet(args.binary, Path(directory), 3).start()
        client = cluster.client(retryWrites=True, retryReads=True, maxPoolSize=64)
        try:
            client.bank.accounts.insert_many(
                [{"_id": i, "balance": OPENING_BALANCE} for i in range(args.accounts)]
            )
            client.bank.create_collection("transfers")
            client.bank.create_collection("tallies")
            started = time.monotonic()
            bank = Bank(client, args.accounts, started + args.seconds)
            threads = [
                threading.Thread(target=bank.transfer, args=(t,)) for t in range(args.threads)
            ]
            threads += [threading.Thread(target=bank.read_totals) for _ in range(args.readers)]
            for thread in threads:
                thread.start()
            killed = None
            if args.kill_primary:
                time.sleep(args.seconds / 2)
                killed = cluster.wait_for_primary()
                killed.kill()
                time.sleep(2)
                killed.start()
            for thread in threads:
                thread.join(timeout=args.seconds + 180)
            elapsed = time.monotonic() - started
            outcome = check(bank)
        finally:
            cluster.kill()
    latencies = sorted(bank.latencies)
    expected_total = args.accounts * OPENING_BALANCE
    summary = {
        "accounts": args.accounts,
        "threads": args.threads,
        "seconds": round(elapsed, 1),
        "primary_killed": bool(killed),
        "committed_transactions": len(bank.committed),
        "transactions_per_s": round(len(bank.committed) / elapsed, 1),
        "retried_share": round(1 - len(bank.committed) / max(bank.attempts, 1), 4),
        "latency_p50_ms": round(1000 * statistics.median(latencies), 2) if latencies else None,
        "latency_p99_ms": (
            round(1000 * latencies[int(0.99 * (len(latencies) - 1))], 2) if latencies else None
        ),
        "failed_transfers": len(bank.unknown),
        "snapshot_reads": len(bank.totals),
        "snapshot_totals_constant": set(bank.totals) <= {expected_total},
        **outcome,
        "errors": bank.errors[:5],
    }
    args.out.write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    ok = (
        summary["snapshot_totals_constant"]
        and outcome["lost_committed_transfers"] == 0
        and outcome["unexpected_transfers"] == 0
        and outcome["balances_match_records"]
        and outcome["tallies_match_records"]
        and outcome["total_now"] == expected_total
        and bank.totals
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
