"""No query takes the server down: values, stages and operations stay within MongoDB's
limits, and the server's memory budget refuses new memory-heavy work instead of letting
the kernel kill the process.

Each hostile query must fail with MongoDB's error code while another connection is
served normally: a value that doubles itself (16 MB strings: 16493; arrays, objects and
`$range` past 100 MB of memory: ExceededMemoryLimit; nesting past BSON's depth:
Overflow), accumulators past 100 MB (`$push`, `$addToSet`), documents past 16 MB where
they leave a pipeline or an update (BSONObjectTooLarge), `$lookup` results past 100 MB
(4568), `$graphLookup` past its 100 MB (40099), `$facet` output past 100 MB (4031700). A message the budget has no room for
waits for it, then its connection is closed.
The large values are built by the server from a 1 MB string it makes itself, so the
tests send little over the wire.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time

import pytest
from pymongo.errors import OperationFailure

import wire
from helpers import ONE_MB_STRING, doubling, raises_code, unwound

MB = 1024 * 1024


# A string of 2**20 characters made by the server: "a" doubled twenty times.
@pytest.fixture
def one(coll):
    coll.insert_one({"_id": 1, "s": "ab"})
    return coll


@pytest.fixture
def bystander(server):
    """Another client, which must be served while and after a hostile query fails."""
    other = server.client()
    other.admin.command("ping")
    yield other
    assert other.admin.command("ping")["ok"] == 1
    assert other.admin.command("serverStatus")["ok"] == 1


def project(coll, expression):
    return list(coll.aggregate([{"$project": {"x": expression}}]))


def test_a_string_stops_at_16_megabytes(one, bystander):
    with raises_code("Location16493") as info:
        project(one, doubling("$s", {"$concat": ["$$value", "$$value"]}))
    assert info.value.details["errmsg"] == "Tried to create string longer than 16MB"
    with raises_code("Location16493"):
        project(
            one,
            {
                "$replaceAll": {
                    "input": ONE_MB_STRING,
                    "find": "a",
                    "replacement": "aaaaaaaaaaaaaaaaa",
                }
            },
        )


def test_arrays_and_objects_stop_at_100_megabytes_of_memory(one, bystander):
    for bomb in [
        doubling([1], {"$concatArrays": ["$$value", "$$value"]}),
        doubling({"a": 1}, {"a": "$$value", "b": "$$value"}),
        {"$size": {"$range": [0, 2_000_000_000]}},
        {"$size": {"$map": {"input": {"$range": [0, 900_000]}, "in": ["$$this", "$$this"]}}},
        {
            "$size": {
                "$split": [
                    {
                        "$reduce": {
                            "input": {"$range": [0, 23]},
                            "initialValue": ",",
                            "in": {"$concat": ["$$value", "$$value"]},
                        }
                    },
                    ",",
                ]
            }
        },
    ]:
        with raises_code("ExceededMemoryLimit") as info:
            project(one, bomb)
        assert "would use too much memory" in info.value.details["errmsg"]
        assert info.value.details["errmsg"].endswith("Memory limit: 104857600 bytes")
    # Within the limits the same operators work.
    assert project(one, {"$size": {"$range": [0, 100_000]}})[0]["x"] == 100_000


def test_a_value_nested_past_bson_depth_is_refused(one, bystander):
    with raises_code("Overflow") as info:
        project(one, doubling([], ["$$value"], times=100_000))
    assert "exceeded max allowable BSON depth" in info.value.details["errmsg"]


def test_push_and_add_to_set_stop_at_100_megabytes(one, bystander):
    with raises_code("ExceededMemoryLimit") as info:
        list(one.aggregate([*unwound(120), {"$group": {"_id": None, "all": {"$push": "$s"}}}]))
    assert info.value.details["errmsg"] == (
        "$push used too much memory and cannot spill to disk. Memory limit: 104857600 bytes"
    )
    distinct = {"$concat": ["$s", {"$toString": "$n"}]}
    with raises_code("ExceededMemoryLimit") as info:
        list(
            one.aggregate(
                [*unwound(120), {"$group": {"_id": None, "all": {"$addToSet": distinct}}}]
            )
        )
    assert info.value.details["errmsg"].startswith(
        "$addToSet used too much memory and cannot spill to disk. Used: "
    )


def test_a_result_past_16_megabytes_is_too_large(one, bystander):
    with raises_code("BSONObjectTooLarge") as info:
        list(one.aggregate([*unwound(20), {"$group": {"_id": None, "all": {"$push": "$s"}}}]))
    assert info.value.details["errmsg"].startswith("BSONObj size: ")
    assert (
        "is invalid. Size must be between 0 and 16793600(16MB) First element: _id: null"
        in (info.value.details["errmsg"])
    )


def test_an_update_past_16_megabytes_is_refused(coll, bystander):
    coll.insert_one({"_id": 1, "a": "x" * (9 * MB)})
    with raises_code("BSONObjectTooLarge") as info:
        coll.update_one({"_id": 1}, [{"$set": {"b": "$a"}}])
    assert info.value.details["errmsg"] == "Resulting document after update is larger than 16777216"
    assert set(coll.find_one({"_id": 1})) == {"_id", "a"}


def test_lookup_results_stop_at_100_megabytes(one, bystander):
    made = [{"$documents": [{"i": 0}]}, *unwound(110)]
    with raises_code("Location4568") as info:
        list(one.aggregate([{"$lookup": {"pipeline": made, "as": "joined"}}]))
    assert (
        "matching pipeline's $lookup stage exceeds 104857600 bytes" in info.value.details["errmsg"]
    )


def test_graph_lookup_stops_at_100_megabytes(db, bystander):
    # 110 documents of 1 MB in a chain: the search holds all of them.
    db.chain.insert_many([{"_id": i, "next": i + 1, "pad": "p" * MB} for i in range(110)])
    db.start.insert_one({"_id": "s"})
    stage = {
        "$graphLookup": {
            "from": "chain",
            "startWith": 0,
            "connectFromField": "next",
            "connectToField": "_id",
            "as": "r",
        }
    }
    with raises_code("Location40099") as info:
        list(db.start.aggregate([stage]))
    assert info.value.details["errmsg"] == "$graphLookup reached maximum memory consumption"
    bounded = {**stage["$graphLookup"], "maxDepth": 3}
    assert len(next(db.start.aggregate([{"$graphLookup": bounded}]))["r"]) == 4
    with raises_code("Location40101"):
        list(db.start.aggregate([{"$graphLookup": {**bounded, "maxDepth": -1}}]))


def test_facet_output_stops_at_100_megabytes(one, bystander):
    with raises_code("Location4031700") as info:
        list(one.aggregate([*unwound(110), {"$facet": {"all": [{"$project": {"s": 1}}]}}]))
    assert "document constructed by $facet is" in info.value.details["errmsg"]


@pytest.fixture
def budgeted(start_server):
    """A private server whose operations may hold 150 MB together."""
    return start_server("--setParameter", "operationMemoryBudgetMB=150")


def held_bytes(client) -> int:
    return client.admin.command("serverStatus")["basalt"]["memory"]["operationBytesHeld"]


def test_the_server_budget_counts_idle_cursors_and_refuses_new_heavy_work(budgeted):
    client = budgeted.client()
    coll = client.t.c
    coll.insert_one({"_id": 1})
    memory = client.admin.command("serverStatus")["basalt"]["memory"]
    assert memory["operationBudgetBytes"] == 150 * MB
    assert memory["operationBytesHeld"] == 0
    # A sort of 90 documents of 1 MB, left idle after its first document: its buffer
    # stays reserved while the cursor lives.
    cursor = coll.aggregate([*unwound(90), {"$sort": {"n": -1}}], batchSize=1)
    assert next(cursor)["n"] == 89
    assert held_bytes(client) >= 90 * MB
    # A JavaScript runtime reserves its 64 MB cap: there is no room for it now.
    with raises_code("ExceededMemoryLimit") as info:
        list(coll.find({"$where": "this._id == 1"}))
    assert info.value.details["errmsg"].startswith(
        "Out of memory while trying to initialize javascript scope"
    )
    # A second large sort that may not spill is refused past the budget; allowed to
    # spill, it spills and succeeds.
    with raises_code("ExceededMemoryLimit") as info:
        list(coll.aggregate([*unwound(90), {"$sort": {"n": 1}}], allowDiskUse=False))
    assert "the server's budget for operations" in info.value.details["errmsg"]
    # So is a $group that may not spill, and a $facet, whose input cannot.
    with raises_code("ExceededMemoryLimit") as info:
        groups = {"$group": {"_id": "$n", "s": {"$first": "$s"}}}
        list(coll.aggregate([*unwound(60), groups], allowDiskUse=False))
    assert info.value.details["errmsg"].startswith("$group needs more memory")
    with raises_code("ExceededMemoryLimit") as info:
        list(coll.aggregate([*unwound(60), {"$facet": {"n": [{"$count": "n"}]}}]))
    assert info.value.details["errmsg"].startswith("$facet needs more memory")
    spilled = coll.aggregate([*unwound(90), {"$sort": {"n": 1}}, {"$project": {"n": 1}}])
    assert [d["n"] for d in spilled] == list(range(90))
    # Killing the idle cursor gives its memory back, and the refused work runs.
    cursor.close()
    assert held_bytes(client) == 0
    assert [d["_id"] for d in coll.find({"$where": "this._id == 1"})] == [1]
    status = client.admin.command("serverStatus")["basalt"]["memory"]
    assert status["reservationsRefused"] >= 2
    assert status["operationBytesPeak"] >= 90 * MB


def test_unwinding_long_arrays(coll, bystander):
    """$unwind of long arrays (20 x 10,000): each output is made as it is read, from the
    rest of its document (time linear in the output: crates/agg/src/linear_time.rs)."""
    coll.insert_many([{"_id": i, "arr": list(range(10_000))} for i in range(20)])
    assert sum(1 for _ in coll.aggregate([{"$unwind": "$arr"}])) == 200_000


def test_failed_operations_give_their_memory_back(one, server):
    client = server.client()
    before = held_bytes(client)
    for _ in range(3):
        with pytest.raises(OperationFailure):
            list(one.aggregate([*unwound(120), {"$sort": {"n": 1}}], allowDiskUse=False))
    assert held_bytes(client) <= before


def test_a_message_larger_than_the_budget_is_cut_off(start_server):
    srv = start_server("--setParameter", "operationMemoryBudgetMB=16")
    docs = [{"_id": i, "pad": "p" * MB} for i in range(20)]
    message = wire.op_msg({"insert": "big", "$db": "t"}, sequences={"documents": docs})
    with socket.create_connection(("127.0.0.1", srv.port), timeout=60) as sock:
        sock.sendall(message[:1000])
        # Others are served while the message waits for memory.
        assert srv.client().admin.command("ping")["ok"] == 1
        # The server may close before all of it is sent.
        with contextlib.suppress(OSError):
            sock.sendall(message[1000:])
        assert sock.recv(16) == b""
    assert "needs more memory than the server's budget" in srv.log_text()
    client = srv.client()
    client.t.small.insert_one({"_id": 1})
    assert client.t.small.count_documents({}) == 1
    assert client.t.big.count_documents({}) == 0


def test_a_message_waits_for_the_memory_another_operation_gives_back(start_server):
    srv = start_server("--setParameter", "operationMemoryBudgetMB=100")
    client = srv.client()
    client.t.c.insert_one({"_id": 1})
    # An idle sort holds about 92 MB of the 100: a 20 MB message has to wait.
    cursor = client.t.c.aggregate([*unwound(90), {"$sort": {"n": -1}}], batchSize=1)
    next(cursor)
    docs = [{"_id": i, "pad": "p" * MB} for i in range(20)]
    message = wire.op_msg({"insert": "big", "$db": "t"}, sequences={"documents": docs})
    with wire.RawConnection(srv.port, timeout_s=60) as conn:
        conn.send(message[:1000])
        sender = threading.Thread(target=conn.send, args=(message[1000:],), daemon=True)
        sender.start()
        time.sleep(1)
        assert held_bytes(client) >= 90 * MB
        cursor.close()  # the sort's memory goes back: the message gets it
        sender.join(60)
        reply = conn.read_message()
    assert reply is not None, "the connection was closed instead of waiting"
    assert client.t.big.count_documents({}) == 20
