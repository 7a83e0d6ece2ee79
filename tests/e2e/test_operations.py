"""Operating a running server: currentOp, killOp, top, the profiler, serverStatus's
sections for mongostat, and MongoDB's own Database Tools where they are installed.

An operator finds a runaway query with `currentOp`, stops it with `killOp` (the query
fails with Interrupted, the server and connection live on), sees where time goes per
collection with `top` (what `mongotop` polls), and names the slow queries with the
profiler (`profile`, `<db>.system.profile`) and the "Slow query" log lines.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pymongo
import pytest
from pymongo.errors import OperationFailure

from helpers import raises_code, wait_until

SLEEPY_WHERE = "function () { sleep(20); return true; }"


class Background:
    """Runs `work` on a thread and keeps its outcome (a result or an exception) and when
    it ended."""

    def __init__(self, work):
        self.outcome = None
        self.ended_at = None
        self.thread = threading.Thread(target=self._run, args=(work,), daemon=True)
        self.thread.start()

    def _run(self, work):
        try:
            self.outcome = work()
        except Exception as error:  # noqa: BLE001 - the test inspects it
            self.outcome = error
        self.ended_at = time.monotonic()

    def join(self, timeout_s: float = 30.0):
        self.thread.join(timeout_s)
        assert not self.thread.is_alive(), "the operation did not end"
        return self.outcome


def running(client, **filter_):
    """The operations currentOp lists that match `filter_`."""
    return client.admin.command("currentOp", **filter_)["inprog"]


def kill_when_running(client, ns: str, kind: str) -> tuple[dict, float]:
    """Waits until an operation of `kind` on `ns` runs, kills it; returns the operation
    as currentOp listed it and when killOp answered."""
    op = wait_until(lambda: running(client, ns=ns, op=kind), what=f"a running {kind} on {ns}")[0]
    reply = client.admin.command("killOp", op=op["opid"])
    assert reply["info"] == "attempting to kill op"
    return op, time.monotonic()


def test_current_op_lists_a_running_query_and_kill_op_stops_it(client, db):
    db.c.insert_many([{"_id": i} for i in range(500)])
    ns = f"{db.name}.c"
    query = Background(lambda: list(db.c.find({"$where": SLEEPY_WHERE}, comment="runaway")))
    op, killed_at = kill_when_running(client, ns, "query")
    assert op["command"]["find"] == "c"
    assert op["command"]["comment"] == "runaway"
    assert op["active"] is True and op["type"] == "op"
    assert isinstance(op["opid"], int) and op["microsecs_running"] >= 0
    assert op["client"].startswith("127.0.0.1:")
    error = query.join()
    assert isinstance(error, OperationFailure), error
    assert error.code == 11601 and error.details["codeName"] == "Interrupted"
    # Scripts look at the kill flag every few thousand operations, and sleep() every
    # 10 ms: the query ends at once, not after the 10 s the 500 sleeps would take.
    print(f"killOp to failure: {1000 * (query.ended_at - killed_at):.1f} ms")
    assert query.ended_at - killed_at < 2.0
    # The connection and the collection are fine afterwards.
    assert db.c.count_documents({}) == 500
    assert not running(client, ns=ns, op="query")


def test_kill_op_stops_a_long_aggregation_without_javascript(client, db):
    db.a.insert_many([{"_id": i, "k": i % 7} for i in range(3000)])
    db.b.insert_many([{"_id": i, "k": i % 5} for i in range(3000)])
    # A join of every document with every other: millions of comparisons.
    pipeline = [
        {
            "$lookup": {
                "from": "b",
                "let": {"k": "$k"},
                "pipeline": [{"$match": {"$expr": {"$lt": ["$k", "$$k"]}}}, {"$count": "n"}],
                "as": "smaller",
            }
        },
        {"$group": {"_id": None, "n": {"$sum": 1}}},
    ]
    ns = f"{db.name}.a"
    aggregation = Background(lambda: list(db.a.aggregate(pipeline)))
    op, killed_at = kill_when_running(client, ns, "command")
    assert op["command"]["aggregate"] == "a"
    error = aggregation.join()
    assert isinstance(error, OperationFailure), error
    assert error.code == 11601
    print(f"killOp to failure: {1000 * (aggregation.ended_at - killed_at):.1f} ms")
    assert aggregation.ended_at - killed_at < 2.0


def test_current_op_filters_and_the_current_op_stage(client, db):
    ops = client.admin.command({"currentOp": 1, "$ownOps": True, "op": "command"})["inprog"]
    # The currentOp command sees itself.
    assert any("currentOp" in op["command"] for op in ops), ops
    staged = list(client.admin.aggregate([{"$currentOp": {"allUsers": True}}]))
    me = [op for op in staged if "aggregate" in op["command"]]
    assert me and me[0]["ns"] == "admin.$cmd.aggregate", me
    assert running(client, ns="nowhere.none") == []
    with raises_code("Unauthorized"):
        db.command("currentOp")


def test_kill_op_errors_as_mongod(client, db):
    assert client.admin.command("killOp", op=2**31 - 1)["info"] == "attempting to kill op"
    assert client.admin.command("killOp", op=12.0, comment={"any": 1})["ok"] == 1.0
    with raises_code("NoSuchKey"):
        client.admin.command("killOp")
    with raises_code("TypeMismatch"):
        client.admin.command("killOp", op="12")
    with raises_code("BadValue"):
        client.admin.command("killOp", op=1.5)
    with raises_code("Location26823"):
        client.admin.command("killOp", op=2**31)
    with raises_code("Unauthorized"):
        db.command("killOp", op=1)


def figures(client, ns: str) -> dict:
    return client.admin.command("top")["totals"][ns]


def test_top_counts_each_kind_of_operation_per_collection(client, db):
    ns = f"{db.name}.c"
    db.c.insert_many([{"_id": i, "a": i} for i in range(5)])
    list(db.c.find())
    db.c.update_one({"_id": 0}, {"$set": {"a": 9}})
    db.c.delete_one({"_id": 4})
    db.c.count_documents({})
    usage = figures(client, ns)
    assert client.admin.command("top")["totals"]["note"] == "all times in microseconds"
    for kind in ("insert", "queries", "update", "remove"):
        assert usage[kind]["count"] == 1, (kind, usage)
    assert usage["commands"]["count"] >= 1  # the count's aggregate
    assert usage["writeLock"]["count"] == 3
    assert usage["readLock"]["count"] >= 2
    assert usage["total"]["count"] == usage["readLock"]["count"] + usage["writeLock"]["count"]
    assert usage["total"]["time"] >= usage["queries"]["time"] > 0
    db.c.drop()
    assert ns not in client.admin.command("top")["totals"]
    with raises_code("Unauthorized"):
        db.command("top")


def test_profiler_settings_and_errors(own_server):
    client = own_server.client()
    db = client.shop
    assert db.command("profile", -1) == {"was": 0, "slowms": 100, "sampleRate": 1.0, "ok": 1.0}
    db.command("profile", 1, slowms=20, sampleRate=0.5, filter={"op": "query"})
    settings = db.command("profile", -1)
    assert settings["was"] == 1 and settings["slowms"] == 20 and settings["sampleRate"] == 0.5
    assert settings["filter"] == {"op": {"$eq": "query"}}
    assert "filter" in settings["note"]
    # slowms and sampleRate are the server's, the level and filter the database's.
    other = client.other.command("profile", -1)
    assert other["was"] == 0 and other["slowms"] == 20 and "filter" not in other
    db.command("profile", 0, filter="unset")
    assert "filter" not in db.command("profile", -1)
    for bad, code in [
        ({"profile": 1, "sampleRate": 1.5}, "BadValue"),
        ({"profile": 1, "filter": "everything"}, "BadValue"),
        ({"profile": "1"}, "TypeMismatch"),
        ({"profile": 0, "slowms": True}, "TypeMismatch"),
        ({"profile": None}, "Location40414"),
        ({"profile": 0, "bogus": 1}, "Location40415"),
    ]:
        with raises_code(code):
            db.command(bad)


def test_profiler_writes_entries_for_the_operations_it_is_asked_to(own_server):
    client = own_server.client(appname="profiled-app")
    db = client.shop
    db.items.insert_many([{"_id": i, "n": i} for i in range(50)])
    db.items.create_index("n")
    db.command("profile", 2)
    list(db.items.find({"n": {"$gte": 40}}))
    list(db.items.find({"x": 1}))
    db.items.update_many({"n": {"$lt": 3}}, {"$set": {"y": 1}})
    db.items.delete_one({"_id": 49})
    db.command("profile", 0)
    entries = list(db.system.profile.find())
    assert db.command("listCollections", filter={"name": "system.profile"})["cursor"]["firstBatch"][
        0
    ]["options"]["capped"]
    queries = [e for e in entries if e["op"] == "query"]
    by_index, scanned = queries[0], queries[1]
    assert by_index["ns"] == "shop.items"
    assert by_index["command"]["filter"] == {"n": {"$gte": 40}}
    assert by_index["planSummary"] == "IXSCAN { n: 1 }"
    assert by_index["keysExamined"] == 10 and by_index["docsExamined"] == 10
    assert by_index["nreturned"] == 10 and by_index["cursorExhausted"] is True
    assert scanned["planSummary"] == "COLLSCAN" and scanned["docsExamined"] == 50
    assert scanned["nreturned"] == 0
    for entry in queries:
        assert entry["appName"] == "profiled-app"
        assert entry["client"] == "127.0.0.1"
        assert entry["millis"] >= 0 and entry["responseLength"] > 0
        assert entry["protocol"] == "op_msg"
    update = next(e for e in entries if e["op"] == "update")
    assert update["nMatched"] == 3 and update["nModified"] == 3
    remove = next(e for e in entries if e["op"] == "remove")
    assert remove["ndeleted"] == 1
    # The profile command that turned profiling off is the last entry: nothing after.
    assert entries[-1]["op"] == "command" and entries[-1]["command"]["profile"] == 0

    # Level 1 with a filter: only what the filter takes, whatever its speed.
    db.system.profile.drop()
    db.command("profile", 1, filter={"op": "remove"})
    list(db.items.find())
    db.items.delete_one({"_id": 48})
    db.command("profile", 0, filter="unset")
    assert [e["op"] for e in db.system.profile.find()] == ["remove"]

    # Level 1 without a filter: only operations slower than slowms.
    db.system.profile.drop()
    db.command("profile", 1, slowms=150)
    list(db.items.find())
    list(db.items.find({"$where": "function () { sleep(200); return true; }"}, limit=1))
    db.command("profile", 0, slowms=100)
    slow = list(db.system.profile.find())
    assert len(slow) == 1 and slow[0]["millis"] >= 150, slow
    assert "$where" in slow[0]["command"]["filter"]


def test_slow_operations_are_logged(own_server):
    client = own_server.client()
    client.shop.command("profile", 0, slowms=0)
    client.shop.items.insert_one({"_id": "logged"})
    log = client.admin.command("getLog", "global")["log"]
    slow = [line for line in log if "Slow query" in line and "items" in line]
    assert slow, log[-5:]
    assert '"op"' in slow[-1] and '"ninserted"' in slow[-1]
    # A large command is cut to 10 KB in the line (mongod's maxLogSizeKB): getLog's
    # 1,024 lines would otherwise hold every large query whole.
    client.shop.command("find", "items", filter={"blob": "x" * 4_000_000})
    log = client.admin.command("getLog", "global")["log"]
    line = next(line for line in reversed(log) if "Slow query" in line and "items" in line)
    assert '"$truncated"' in line and len(line) < 20_000, line[:300]


def test_server_status_has_the_sections_mongostat_reads(client, db):
    before = client.admin.command("serverStatus")
    db.c.insert_one({"x": "y" * 1000})
    after = client.admin.command("serverStatus")
    network = after["network"]
    assert network["bytesIn"] - before["network"]["bytesIn"] > 1000
    assert network["bytesOut"] > before["network"]["bytesOut"]
    assert network["numRequests"] > before["network"]["numRequests"]
    lock = after["globalLock"]
    assert lock["totalTime"] > 0
    assert lock["currentQueue"] == {"total": 0, "readers": 0, "writers": 0}
    assert lock["activeClients"]["total"] >= 1  # this serverStatus
    assert set(after["opcountersRepl"]) == set(after["opcounters"])
    # The cache figures mongostat's `used` and `dirty` read: the write just made sits in a
    # memtable, which counts as held and dirty.
    cache = after["wiredTiger"]["cache"]
    assert cache["maximum bytes configured"] > 0
    assert cache["tracked dirty bytes in the cache"] > 1000
    assert cache["bytes currently in the cache"] >= cache["tracked dirty bytes in the cache"]


def tools_directory() -> Path | None:
    """MongoDB's Database Tools: `$MONGO_TOOLS_DIR`, `make mongo-tools`'s, or on the
    PATH."""
    if os.environ.get("MONGO_TOOLS_DIR"):
        return Path(os.environ["MONGO_TOOLS_DIR"])
    built = Path(__file__).resolve().parents[2] / ".tools" / "bin"
    if (built / "mongodump").is_file():
        return built
    found = shutil.which("mongodump")
    return Path(found).parent if found else None


def tool(name: str) -> str:
    directory = tools_directory()
    if directory is None or not (directory / name).is_file():
        pytest.skip(
            f"{name} not installed: build MongoDB's Database Tools with `make mongo-tools "
            "MONGO_TOOLS_SRC=<a github.com/mongodb/mongo-tools checkout>`, or set "
            "MONGO_TOOLS_DIR to where they are"
        )
    return str(directory / name)


def run_tool(name: str, *args: str, timeout_s: float = 60) -> str:
    done = subprocess.run(
        [tool(name), *args], capture_output=True, text=True, timeout=timeout_s, check=False
    )
    assert done.returncode == 0, f"{name} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


def test_database_tools_round_trip_and_monitor(server, client, db, tmp_path):
    uri = f"mongodb://127.0.0.1:{server.port}"
    db.items.insert_many([{"_id": i, "n": i, "tags": ["a", i]} for i in range(200)])
    db.items.create_index([("n", -1)], name="n_down")
    db.create_collection("log", capped=True, size=65536)
    db.log.insert_one({"m": "hello"})
    db.command("create", "recent", viewOn="items", pipeline=[{"$match": {"n": {"$gte": 150}}}])
    dump = tmp_path / "dump"
    run_tool("mongodump", f"--uri={uri}", f"--db={db.name}", f"--out={dump}")
    run_tool(
        "mongorestore", f"--uri={uri}", f"--nsFrom={db.name}.*", f"--nsTo={db.name}_r.*", str(dump)
    )
    restored = client[f"{db.name}_r"]
    try:
        assert list(restored.items.find().sort("_id")) == list(db.items.find().sort("_id"))
        assert "n_down" in restored.items.index_information()
        assert restored.log.options()["capped"] is True
        assert restored.recent.count_documents({}) == 50
    finally:
        client.drop_database(restored.name)
    top = run_tool("mongotop", f"--uri={uri}", "--rowcount=1", "1")
    assert "ns" in top and "total" in top
    stat = run_tool("mongostat", f"--uri={uri}", "--rowcount=2", "1")
    assert "insert" in stat and "net_in" in stat
    # The cache columns, which mongostat shows by default only for a wiredTiger engine.
    cache = run_tool("mongostat", f"--uri={uri}", "-o", "dirty,used", "--rowcount=1", "1")
    assert cache.split()[:2] == ["dirty", "used"] and cache.split()[2].endswith("%")
    exported = tmp_path / "items.csv"
    run_tool(
        "mongoexport", f"--uri={uri}", f"--db={db.name}", "--collection=items",
        "--type=csv", "--fields=_id,n", f"--out={exported}",
    )  # fmt: skip
    assert exported.read_text().splitlines()[:2] == ["_id,n", "0,0"]


def test_kill_op_leaves_other_connections_alone(client, db):
    db.c.insert_many([{"_id": i} for i in range(300)])
    other = pymongo.MongoClient(client.address[0], client.address[1])
    try:
        query = Background(lambda: list(db.c.find({"$where": SLEEPY_WHERE})))
        kill_when_running(client, f"{db.name}.c", "query")
        assert isinstance(query.join(), OperationFailure)
        assert other[db.name].c.count_documents({}) == 300
    finally:
        other.close()


def json_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def test_log_file_in_mongod_json_lines_rotated_by_log_rotate(start_server, tmp_path):
    path = tmp_path / "basalt.log"
    path.write_text("from an earlier run\n")
    srv = start_server("--logpath", str(path), "--slowms", "0", quiet=False)
    client = srv.client()
    client.shop.items.insert_one({"_id": 1})
    lines = wait_until(
        lambda: [line for line in json_lines(path) if line["msg"] == "Slow query"],
        what="a slow query line",
    )
    # The file found at start was renamed aside (no --logappend), not appended to.
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("basalt.log.")]
    accepted = next(line for line in json_lines(path) if line["msg"] == "Connection accepted")
    assert accepted["c"] == "NETWORK" and accepted["s"] == "I"
    assert accepted["ctx"].startswith("conn") and "$date" in accepted["t"]
    assert accepted["attr"]["remote"].startswith("127.0.0.1:")
    insert = next(line for line in lines if line["attr"].get("op") == "insert")
    assert insert["c"] == "COMMAND" and insert["attr"]["ns"] == "shop.items"
    assert insert["attr"]["ninserted"] == 1
    # getLog gives the same lines.
    assert any('"Slow query"' in line for line in client.admin.command("getLog", "global")["log"])

    assert client.admin.command("logRotate", 1)["ok"] == 1.0
    rotated = sorted(p for p in tmp_path.iterdir() if p.name.startswith("basalt.log."))
    assert len(rotated) == 2
    client.shop.items.find_one()
    wait_until(lambda: path.exists() and json_lines(path), what="lines in the new file")
    with raises_code("NoSuchKey"):
        client.admin.command("logRotate", "audit")
    with raises_code("TypeMismatch"):
        client.admin.command("logRotate", [1])
    with raises_code("Unauthorized"):
        client.shop.command("logRotate", 1)


def test_log_append_and_profiler_flags(start_server, tmp_path):
    path = tmp_path / "basalt.log"
    path.write_text('{"msg": "kept"}\n')
    srv = start_server(
        "--logpath", str(path), "--logappend", "--profile", "2", "--slowms", "7"
    )  # fmt: skip
    client = srv.client()
    assert json_lines(path)[0] == {"msg": "kept"}
    settings = client.shop.command("profile", -1)
    assert settings["was"] == 2 and settings["slowms"] == 7
    client.shop.items.insert_one({"_id": 1})
    assert client.shop.system.profile.count_documents({"op": "insert"}) == 1
