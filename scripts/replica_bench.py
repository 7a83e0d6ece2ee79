"""Benchmarks a local three-member replica set (`make replica-bench`): `basalt bench`'s
W1 load and W4 (20 threads, puts and gets by _id) through the set with w: "majority",
then the initial sync of a fourth member added by reconfig, timed from the reconfig to
the new member holding every document, with its answers checked against the primary's.

    scripts/replica_bench.py --binary target/release/basalt --size 1000000

Writes the figures to --out (JSON) and prints them; exits non-zero when an answer is
wrong. Everything runs on 127.0.0.1 under --dir.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pymongo
from bson.codec_options import CodecOptions
from bson.raw_bson import RawBSONDocument

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "e2e"))

from basalt_server import ReplicaSet, default_binary  # noqa: E402

DB = "basalt_bench"
SYNC_TIMEOUT_S = 1800


def fingerprint(client: pymongo.MongoClient) -> dict:
    """What the copy must hold exactly: per collection, its count, its indexes and a hash
    of every document's bytes in _id order, read from the member itself."""
    db = client.get_database(
        DB,
        read_preference=pymongo.ReadPreference.SECONDARY_PREFERRED,
        codec_options=CodecOptions(document_class=RawBSONDocument),
    )
    out = {}
    for name in sorted(db.list_collection_names()):
        collection = db[name]
        digest = hashlib.sha256()
        count = 0
        for document in collection.find().sort("_id", 1).batch_size(10_000):
            digest.update(document.raw)
            count += 1
        out[name] = {
            "count": count,
            "indexes": sorted(collection.index_information()),
            "sha256": digest.hexdigest(),
        }
    return out


def logged_ms(members, what: str) -> int | None:
    """The duration of the last `what` the members logged ("... in N ms")."""
    times = [
        int(match.group(1))
        for member in members
        for line in member.log_text().splitlines()
        if what in line and (match := re.search(r" in (\d+) ms", line))
    ]
    return times[-1] if times else None


def initial_sync(cluster: ReplicaSet, binary: Path, client: pymongo.MongoClient) -> dict:
    expected = fingerprint(client)
    documents = sum(c["count"] for c in expected.values())
    fourth = cluster.add_member(binary)
    config = client.admin.command("replSetGetConfig")["config"]
    config["version"] += 1
    config["members"].append(
        {"_id": len(config["members"]), "host": f"127.0.0.1:{fourth.port}", "priority": 0}
    )
    # The copy is sent while the reconfig waits for the new member to catch up. While it
    # loads the copy the member is in STARTUP2 and refuses reads; its replSetGetStatus
    # reports the progress (initialSyncStatus): a thread watches both meanwhile.
    states, progress = [], []
    synced = threading.Event()

    def watch() -> None:
        with pymongo.MongoClient(fourth.uri, directConnection=True) as watcher:
            while not synced.is_set():
                try:
                    status = watcher.admin.command("replSetGetStatus")
                except pymongo.errors.PyMongoError:
                    status = {}
                me = [m["stateStr"] for m in status.get("members", []) if m.get("self")]
                if me and me[0] not in states[-1:]:
                    states.append(me[0])
                if sync_status := status.get("initialSyncStatus"):
                    progress.append(sync_status["approxTotalBytesCopied"])
                time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    started = time.monotonic()
    client.admin.command("replSetReconfig", config)
    reconfig_s = time.monotonic() - started
    with pymongo.MongoClient(
        fourth.uri, directConnection=True, readPreference="secondaryPreferred"
    ) as reader:
        deadline = started + SYNC_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                counts = {
                    name: reader[DB][name].estimated_document_count()
                    for name in expected
                    if name in reader[DB].list_collection_names()
                }
            except pymongo.errors.NotPrimaryError:
                counts = None
            if counts == {name: c["count"] for name, c in expected.items()}:
                break
            time.sleep(0.05)
        synced_s = time.monotonic() - started
        synced.set()
        watcher.join()
        actual = fingerprint(reader)
    return {
        "copy_built_ms": logged_ms(cluster.members[:-1], "built the copy"),
        "copy_loaded_ms": logged_ms([fourth], "loaded the copy"),
        "documents": documents,
        "reconfig_s": reconfig_s,
        "synced_s": synced_s,
        "docs_per_s": documents / synced_s,
        "states_seen": states,
        "bytes_copied_seen": progress,
        "answers_correct": actual == expected,
        "expected": expected,
        "actual": actual,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", type=Path, default=default_binary())
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--dir", type=Path, default=Path("replica-bench"))
    parser.add_argument("--out", type=Path, default=Path("replica-bench-results.json"))
    args = parser.parse_args()
    shutil.rmtree(args.dir, ignore_errors=True)
    # The members log how long copies of the data take to build and load.
    os.environ["BASALT_LOG"] = "warn,basalt_repl=info"
    cluster = ReplicaSet(args.binary, args.dir / "set", 3)
    try:
        cluster.start()
        uri = cluster.uri + "&w=majority"
        bench_out = args.dir / "bench"
        subprocess.run(
            [
                str(args.binary),
                "bench",
                "--uri",
                uri,
                "--workloads",
                "w1,w4",
                "--peers",
                "none",
                "--size",
                str(args.size),
                "--out",
                str(bench_out),
                "--workdir",
                str(args.dir / "work"),
            ],
            check=True,
        )
        bench = json.loads((bench_out / "results.json").read_text())
        client = cluster.client(w="majority")
        sync = initial_sync(cluster, args.binary, client)
        results = {
            "members": 3,
            "size": args.size,
            "bench_answers_correct": bench["run"]["all_answers_correct"],
            "w1_load_docs_per_s": bench["workloads"][0]["load"]["basalt_docs_per_s"],
            "w4": bench["w4"],
            "initial_sync": sync,
            "panics": cluster.panics(),
        }
    finally:
        cluster.kill()
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    w4 = results["w4"]
    print(
        f"W4 through the set: put {w4['put']['ops_per_s']:.0f} ops/s "
        f"(p99 {w4['put']['p99_ms']:.2f} ms), get {w4['get']['ops_per_s']:.0f} ops/s "
        f"(p99 {w4['get']['p99_ms']:.2f} ms)"
    )
    print(
        f"initial sync: {sync['documents']} documents in {sync['synced_s']:.2f} s = "
        f"{sync['docs_per_s']:.0f} docs/s (copy built in {sync['copy_built_ms']} ms, load finished "
        f"{sync['copy_loaded_ms']} ms after it arrived; states {sync['states_seen']}), answers {'correct' if sync['answers_correct'] else 'WRONG'}"
    )
    ok = sync["answers_correct"] and results["bench_answers_correct"] and not results["panics"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
