"""Multi-document transactions on a replica set, through pymongo's session API:
snapshot isolation with a transaction's own writes visible to it, atomic commit,
abort without a trace, first-writer-wins conflicts with MongoDB's codes and labels,
the commands a transaction refuses, and a bank of concurrent transfers whose total
never changes in any snapshot. Also snapshot sessions: reads outside transactions at
one `atClusterTime`.
"""

from __future__ import annotations

import random
import threading
import time

import bson
import pytest
from pymongo import ReadPreference
from pymongo.errors import OperationFailure
from pymongo.read_concern import ReadConcern
from pymongo.write_concern import WriteConcern

from helpers import CODES, raises_code

CODES.update(
    {
        "WriteConflict": 112,
        "NoSuchTransaction": 251,
        "OperationNotSupportedInTransaction": 263,
        "TransactionTooOld": 225,
        "InvalidOptions": 72,
        "SnapshotTooOld": 239,
        "TransactionTooLarge": 257,
    }
)


@pytest.fixture
def client(one_member_set):
    return one_member_set.client()


def test_a_transaction_sees_its_writes_and_others_see_them_at_commit(client):
    coll = client.bank.accounts
    coll.insert_many([{"_id": 1, "n": 10}, {"_id": 2, "n": 20}])
    with client.start_session() as session:
        session.start_transaction()
        coll.update_one({"_id": 1}, {"$inc": {"n": -5}}, session=session)
        coll.insert_one({"_id": 3, "n": 5}, session=session)
        coll.delete_one({"_id": 2}, session=session)
        inside = sorted(coll.find({}, session=session), key=lambda d: d["_id"])
        assert inside == [{"_id": 1, "n": 5}, {"_id": 3, "n": 5}]
        total = list(
            coll.aggregate([{"$group": {"_id": None, "t": {"$sum": "$n"}}}], session=session)
        )
        assert total[0]["t"] == 10
        assert coll.count_documents({"n": 5}, session=session) == 2
        assert coll.distinct("n", session=session) == [5]
        # Nothing is visible outside before the commit.
        assert sorted(d["_id"] for d in coll.find()) == [1, 2]
        assert coll.find_one({"_id": 1}) == {"_id": 1, "n": 10}
        session.commit_transaction()
    assert sorted(coll.find(), key=lambda d: d["_id"]) == [{"_id": 1, "n": 5}, {"_id": 3, "n": 5}]
    assert coll.count_documents({}) == 2
    assert coll.estimated_document_count() == 2


def test_an_aborted_transaction_leaves_no_trace(client):
    coll = client.bank.accounts
    coll.insert_one({"_id": 1, "n": 10})
    with client.start_session() as session:
        session.start_transaction()
        coll.update_one({"_id": 1}, {"$set": {"n": 0}}, session=session)
        coll.insert_one({"_id": 2}, session=session)
        session.abort_transaction()
    assert list(coll.find()) == [{"_id": 1, "n": 10}]
    assert coll.estimated_document_count() == 1
    # The documents it touched are free for the next writer.
    with client.start_session() as session, session.start_transaction():
        coll.update_one({"_id": 1}, {"$set": {"n": 11}}, session=session)
    assert coll.find_one({"_id": 1}) == {"_id": 1, "n": 11}


def test_current_op_lists_an_open_transaction_between_its_statements(client):
    """$currentOp's idleSessions (on by default, and in the currentOp command): an open
    transaction that runs no statement now is an `idleSession` with its session and
    `transaction` figures, until it commits."""
    coll = client.bank.accounts
    coll.insert_one({"_id": 1, "n": 10})

    def idle(**options):
        stage = {"$currentOp": {"allUsers": True, **options}}
        return [op for op in client.admin.aggregate([stage]) if op["type"] == "idleSession"]

    with client.start_session() as session:
        session.start_transaction(read_concern=ReadConcern("snapshot"))
        coll.update_one({"_id": 1}, {"$inc": {"n": 1}}, session=session)
        time.sleep(0.05)
        [entry] = idle()
        assert entry["lsid"]["id"] == session.session_id["id"]
        assert entry["desc"] == "inactive transaction" and entry["active"] is False
        transaction = entry["transaction"]
        assert isinstance(transaction["parameters"]["txnNumber"], int)
        assert transaction["parameters"]["autocommit"] is False
        assert transaction["parameters"]["readConcern"] == {"level": "snapshot"}
        assert transaction["timeInactiveMicros"] >= 50_000
        assert transaction["timeOpenMicros"] >= transaction["timeInactiveMicros"]
        assert transaction["expiryTime"] > transaction["startWallClockTime"]
        assert idle(idleSessions=False) == []
        listed = client.admin.command("currentOp")["inprog"]
        assert [op["lsid"] for op in listed if op.get("type") == "idleSession"] == [entry["lsid"]]
        session.commit_transaction()
    assert idle() == []


def test_a_transaction_reads_one_snapshot(client):
    coll = client.bank.accounts
    coll.insert_one({"_id": 1, "n": 1})
    with client.start_session() as session:
        session.start_transaction()
        assert coll.find_one({"_id": 1}, session=session)["n"] == 1
        coll.update_one({"_id": 1}, {"$set": {"n": 2}})
        coll.insert_one({"_id": 2})
        assert coll.find_one({"_id": 1}, session=session)["n"] == 1
        assert coll.count_documents({}, session=session) == 1
        session.commit_transaction()
    assert coll.find_one({"_id": 1})["n"] == 2


def test_the_first_writer_wins(client):
    coll = client.bank.accounts
    coll.insert_one({"_id": 1, "n": 0})
    first, second = client.start_session(), client.start_session()
    first.start_transaction()
    second.start_transaction()
    coll.update_one({"_id": 1}, {"$inc": {"n": 1}}, session=first)
    with raises_code("WriteConflict") as info:
        coll.update_one({"_id": 1}, {"$inc": {"n": 10}}, session=second)
    assert info.value.has_error_label("TransientTransactionError")
    # The conflict aborted the second transaction.
    with raises_code("NoSuchTransaction") as info:
        second.commit_transaction()
    assert info.value.has_error_label("TransientTransactionError")
    first.commit_transaction()
    assert coll.find_one({"_id": 1})["n"] == 1
    # Two transactions inserting the same _id conflict too.
    first.start_transaction()
    second.start_transaction()
    coll.insert_one({"_id": 2}, session=first)
    with raises_code("WriteConflict"):
        coll.insert_one({"_id": 2}, session=second)
    first.abort_transaction()
    second.end_session()
    first.end_session()


def test_a_write_outside_that_comes_first_fails_the_commit(client):
    coll = client.bank.accounts
    coll.insert_many([{"_id": 1, "n": 0}, {"_id": 2, "n": 0}])
    with client.start_session() as session:
        session.start_transaction()
        coll.update_one({"_id": 1}, {"$inc": {"n": 1}}, session=session)
        coll.update_one({"_id": 2}, {"$inc": {"n": 1}}, session=session)
        coll.update_one({"_id": 2}, {"$set": {"n": 100}})
        with raises_code("WriteConflict") as info:
            session.commit_transaction()
        assert info.value.has_error_label("TransientTransactionError")
    # None of the transaction's writes are there; the other write is.
    assert sorted(coll.find(), key=lambda d: d["_id"]) == [{"_id": 1, "n": 0}, {"_id": 2, "n": 100}]
    # A document the transaction changed after another write was stored conflicts at once.
    with client.start_session() as session:
        session.start_transaction()
        assert coll.find_one({"_id": 1}, session=session)["n"] == 0
        coll.update_one({"_id": 1}, {"$set": {"n": 7}})
        with raises_code("WriteConflict"):
            coll.update_one({"_id": 1}, {"$inc": {"n": 1}}, session=session)


def test_commit_is_answered_again_and_errors_are_mongodbs(client):
    coll = client.bank.accounts
    coll.insert_one({"_id": 0})
    with client.start_session() as session:
        session.start_transaction()
        coll.insert_one({"_id": 1}, session=session)
        session.commit_transaction()
        session.commit_transaction()  # a retried commit gets the first one's answer
        lsid, txn_number = session.session_id, session._transaction_id  # noqa: SLF001
    command = {
        "commitTransaction": 1,
        "lsid": lsid,
        "txnNumber": txn_number,
        "autocommit": False,
    }
    assert client.admin.command(command)["ok"] == 1.0
    with raises_code("NoSuchTransaction"):
        client.admin.command({**command, "txnNumber": txn_number + 5})
    with raises_code("TransactionTooOld"):
        client.bank.command(
            "find", "accounts", lsid=lsid, txnNumber=txn_number - 1, autocommit=False
        )
    with client.start_session() as session:
        session.start_transaction()
        with raises_code("OperationNotSupportedInTransaction"):
            client.bank.command("count", "accounts", session=session)
    with client.start_session() as session:
        session.start_transaction()
        coll.find_one({}, session=session)
        with raises_code("InvalidOptions"):
            coll.database.command(
                "find",
                "accounts",
                session=session,
                readConcern={"level": "local"},
            )


def test_a_standalone_refuses_transactions(start_server):
    client = start_server().client()
    with client.start_session() as session:
        session.start_transaction()
        with raises_code("IllegalOperation"):
            client.test.c.insert_one({"_id": 1}, session=session)


def test_collections_and_indexes_made_in_a_transaction(client):
    db = client.shop
    with client.start_session() as session:
        session.start_transaction()
        db.orders.insert_one({"_id": 1, "sku": "a"}, session=session)
        db.create_collection("audit", session=session)
        db.audit.create_index("at", unique=True, session=session)
        db.audit.insert_one({"_id": 1, "at": 1}, session=session)
        # The transaction sees its collections and enforces its unique index...
        assert db.audit.find_one({"at": 1}, session=session) == {"_id": 1, "at": 1}
        with pytest.raises(OperationFailure) as info:
            db.audit.insert_one({"_id": 2, "at": 1}, session=session)
        assert info.value.code == 11000
    # ...which aborted it: nothing of it exists, inside or out.
    assert set(db.list_collection_names()) == set()
    with client.start_session() as session:
        session.start_transaction()
        db.orders.insert_one({"_id": 1, "sku": "a"}, session=session)
        db.create_collection("audit", session=session)
        db.audit.create_index("at", session=session)
        db.audit.insert_one({"_id": 1, "at": 1}, session=session)
        # Nobody else sees them before the commit.
        assert db.list_collection_names() == []
        assert client.shop.audit.find_one() is None
        session.commit_transaction()
    assert db.orders.find_one() == {"_id": 1, "sku": "a"}
    assert db.audit.find_one() == {"_id": 1, "at": 1}
    assert "at_1" in db.audit.index_information()
    # An abort leaves no collection behind.
    with client.start_session() as session:
        session.start_transaction()
        db.drafts.insert_one({"_id": 1}, session=session)
        db.notes.create_index("n", session=session)
        session.abort_transaction()
    assert sorted(db.list_collection_names()) == ["audit", "orders"]
    # Indexes only on an empty collection the transaction created, as mongod.
    for prepare in (None, "insert"):
        with client.start_session() as session:
            session.start_transaction()
            if prepare:
                db.fresh.insert_one({"_id": 1}, session=session)
                target = db.fresh
            else:
                target = db.orders
            with raises_code("OperationNotSupportedInTransaction") as info:
                target.create_index("x", session=session)
            word = "non-empty" if prepare else "existing"
            assert f"Cannot create new indexes on {word} collection" in str(info.value)
            with raises_code("NoSuchTransaction"):
                session.commit_transaction()
    # An index that exists already is no change, and allowed.
    with client.start_session() as session, session.start_transaction():
        db.audit.create_index("at", session=session)
    assert "fresh" not in db.list_collection_names()


def test_a_collection_created_meanwhile_fails_the_commit(client):
    db = client.shop
    with client.start_session() as session:
        session.start_transaction()
        db.create_collection("late", session=session)
        db.late.insert_one({"_id": 1}, session=session)
        db.create_collection("late")
        with pytest.raises(OperationFailure) as info:
            session.commit_transaction()
        assert info.value.code == CODES["WriteConflict"]
        assert info.value.has_error_label("TransientTransactionError")
    assert db.late.count_documents({}) == 0


def test_unique_indexes_and_many_documents(client):
    coll = client.shop.users
    coll.create_index("email", unique=True)
    coll.insert_one({"_id": 0, "email": "a@x"})
    with client.start_session() as session:
        session.start_transaction()
        with pytest.raises(OperationFailure) as info:
            coll.insert_one({"_id": 1, "email": "a@x"}, session=session)
        assert info.value.code == 11000
        # A write error aborts the transaction, as in MongoDB.
        with raises_code("NoSuchTransaction"):
            session.commit_transaction()
    with client.start_session() as session, session.start_transaction():
        coll.insert_many(
            [{"_id": i, "email": f"{i}@x", "pad": "p" * 200} for i in range(1, 3001)],
            session=session,
        )
        coll.update_many(
            {"_id": {"$gte": 1, "$lte": 1500}}, {"$set": {"half": True}}, session=session
        )
        # A unique value moved from one document to another within the transaction.
        coll.update_one({"_id": 0}, {"$set": {"email": "gone@x"}}, session=session)
        coll.update_one({"_id": 1}, {"$set": {"email": "a@x"}}, session=session)
    assert coll.count_documents({}) == 3001
    assert coll.count_documents({"half": True}) == 1500
    assert coll.find_one({"email": "a@x"})["_id"] == 1


def test_a_commit_reaches_every_member(start_replica_set):
    rs = start_replica_set(members=3)
    client = rs.client()
    coll = client.bank.accounts
    majority = WriteConcern(w="majority")
    with client.start_session() as session, session.start_transaction(write_concern=majority):
        coll.insert_many([{"_id": i} for i in range(10)], session=session)
        coll.delete_one({"_id": 0}, session=session)
        client.bank.create_collection("ledger", session=session)
        client.bank.ledger.create_index("at", session=session)
        client.bank.ledger.insert_one({"_id": 1, "at": 5}, session=session)
    secondary = coll.with_options(read_preference=ReadPreference.SECONDARY)
    with client.start_session(causal_consistency=True) as session:
        coll.find_one({}, session=session)
        assert secondary.count_documents({}, session=session) == 9
        ledger = client.bank.ledger.with_options(read_preference=ReadPreference.SECONDARY)
        assert ledger.find_one({}, session=session) == {"_id": 1, "at": 5}
        explained = ledger.find({"at": 5}, session=session).explain()
        assert "at_1" in str(explained["queryPlanner"]["winningPlan"])


def test_apply_ops_is_all_or_nothing(client):
    coll = client.ops.c
    coll.insert_one({"_id": 1, "v": 1})
    with raises_code("WriteConflict"):
        client.admin.command(
            "applyOps",
            [
                {"op": "i", "ns": "ops.c", "o": {"_id": 2}},
                {
                    "op": "u",
                    "ns": "ops.c",
                    "o": {"_id": 1, "v": 2},
                    "o2": {"_id": 1},
                    "preImageHash": bson.Int64(12345),
                },
            ],
        )
    assert list(coll.find()) == [{"_id": 1, "v": 1}]
    reply = client.admin.command(
        "applyOps",
        [
            {"op": "i", "ns": "ops.c", "o": {"_id": 2}},
            {"op": "u", "ns": "ops.c", "o": {"_id": 1, "v": 2}, "o2": {"_id": 1}},
            {"op": "d", "ns": "ops.c", "o": {"_id": 2}},
        ],
    )
    assert reply["applied"] == 3
    assert list(coll.find()) == [{"_id": 1, "v": 2}]
    with raises_code("BadValue"):
        client.admin.command(
            "applyOps", [{"op": "u", "ns": "ops.c", "o": {"$set": {"v": 3}}, "o2": {"_id": 1}}]
        )


def test_apply_ops_creates_collections_and_indexes_in_its_batch(start_server):
    client = start_server().client()
    create = [
        {"op": "c", "ns": "ops.$cmd", "o": {"create": "made"}},
        {
            "op": "c",
            "ns": "ops.$cmd",
            "o": {"createIndexes": "made", "v": 2, "key": {"k": 1}, "name": "k_1", "unique": True},
        },
        {"op": "i", "ns": "ops.made", "o": {"_id": 1, "k": 1}},
        {"op": "i", "ns": "ops.implicit", "o": {"_id": 1}},
    ]
    # A failing entry leaves nothing behind: no collection, no index, no document.
    with raises_code("DuplicateKey"):
        client.admin.command(
            "applyOps", [*create, {"op": "i", "ns": "ops.made", "o": {"_id": 2, "k": 1}}]
        )
    assert client.ops.list_collection_names() == []
    assert client.admin.command("applyOps", create)["applied"] == 4
    assert sorted(client.ops.list_collection_names()) == ["implicit", "made"]
    assert client.ops.made.index_information()["k_1"]["unique"] is True
    assert list(client.ops.made.find()) == [{"_id": 1, "k": 1}]
    with raises_code("NamespaceExists"):
        client.admin.command("applyOps", create[:1])
    # An index that exists is no change; a new one only on a collection created there.
    assert client.admin.command("applyOps", [create[1]])["applied"] == 1
    new_index = {"createIndexes": "made", "v": 2, "key": {"j": 1}, "name": "j_1"}
    with raises_code("OperationNotSupportedInTransaction"):
        client.admin.command("applyOps", [{"op": "c", "ns": "ops.$cmd", "o": new_index}])
    with raises_code("BadValue"):
        client.admin.command("applyOps", [{"op": "c", "ns": "ops.$cmd", "o": {"drop": "made"}}])


def test_transfers_keep_the_total_in_every_snapshot(client):
    """A small bank: threads move money between accounts in transactions (retrying
    transient errors through with_transaction) while readers sum all balances in one
    snapshot; the sum never changes and every transfer is applied exactly once."""
    accounts, start_balance = 50, 100
    coll = client.bank.get_collection("accounts", write_concern=WriteConcern(w="majority"))
    coll.insert_many([{"_id": i, "balance": start_balance} for i in range(accounts)])
    coll.insert_one({"_id": "log", "transfers": 0})
    expected_total = accounts * start_balance
    deadline = time.monotonic() + 8
    transfers = [0] * 6
    totals, errors = [], []

    def transfer(worker: int):
        rng = random.Random(worker)
        with client.start_session() as session:
            while time.monotonic() < deadline:
                a, b = rng.sample(range(accounts), 2)
                amount = rng.randint(1, 10)

                def move(s, a=a, b=b, amount=amount):
                    coll.update_one({"_id": a}, {"$inc": {"balance": -amount}}, session=s)
                    coll.update_one({"_id": b}, {"$inc": {"balance": amount}}, session=s)
                    coll.update_one({"_id": "log"}, {"$inc": {"transfers": 1}}, session=s)

                try:
                    session.with_transaction(move)
                    transfers[worker] += 1
                except Exception as e:  # noqa: BLE001
                    errors.append(repr(e))

    def read():
        with client.start_session() as session:
            while time.monotonic() < deadline:
                with session.start_transaction(read_concern=ReadConcern("snapshot")):
                    rows = list(coll.find({"balance": {"$exists": True}}, session=session))
                totals.append(sum(r["balance"] for r in rows))

    threads = [threading.Thread(target=transfer, args=(w,)) for w in range(len(transfers))]
    threads += [threading.Thread(target=read) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors[:3]
    assert sum(transfers) > 20
    assert totals and set(totals) == {expected_total}
    assert sum(d.get("balance", 0) for d in coll.find()) == expected_total
    # Every acknowledged transfer was applied once, and no other.
    assert coll.find_one({"_id": "log"})["transfers"] == sum(transfers)


def test_snapshot_sessions_read_one_time_across_batches(client):
    coll = client.shop.items
    coll.insert_many([{"_id": i, "v": 0} for i in range(250)])
    with client.start_session(snapshot=True) as session:
        cursor = coll.find({}, session=session, batch_size=10)
        first = next(cursor)
        coll.update_many({}, {"$set": {"v": 1}})
        coll.insert_one({"_id": 1000, "v": 1})
        # The cursor's later batches read the time of its first.
        rest = list(cursor)
        assert [first, *rest] == [{"_id": i, "v": 0} for i in range(250)]
        # So do the session's next reads, which name that time (atClusterTime).
        assert coll.count_documents({"v": 0}, session=session) == 250
        assert coll.distinct("v", session=session) == [0]
    assert coll.count_documents({"v": 1}) == 251


def test_snapshot_reads_refuse_writes_and_unknown_times(client):
    coll = client.shop.items
    coll.insert_one({"_id": 1})
    with raises_code("InvalidOptions"):
        client.shop.command(
            "insert", "items", documents=[{"_id": 2}], readConcern={"level": "snapshot"}
        )
    with raises_code("InvalidOptions"):
        client.shop.command("count", "items", readConcern={"level": "snapshot"})
    reply = client.shop.command("find", "items", readConcern={"level": "snapshot"})
    at = reply["cursor"]["atClusterTime"]
    assert isinstance(at, bson.Timestamp)
    coll.insert_one({"_id": 3})
    again = client.shop.command(
        "find", "items", readConcern={"level": "snapshot", "atClusterTime": at}
    )
    assert again["cursor"]["firstBatch"] == [{"_id": 1}]
    too_old = bson.Timestamp(at.time, at.inc - 1)
    with raises_code("SnapshotTooOld"):
        client.shop.command(
            "find", "items", readConcern={"level": "snapshot", "atClusterTime": too_old}
        )


def test_a_transaction_past_its_lifetime_is_aborted(start_replica_set):
    rs = start_replica_set(
        members=1, extra_args=["--setParameter", "transactionLifetimeLimitSeconds=1"]
    )
    client = rs.client()
    coll = client.bank.accounts
    coll.insert_one({"_id": 1, "n": 0})
    with client.start_session() as session:
        session.start_transaction()
        coll.update_one({"_id": 1}, {"$inc": {"n": 1}}, session=session)
        time.sleep(1.5)
        # What it held is free: another transaction writes the same document.
        with client.start_session() as other, other.start_transaction():
            coll.update_one({"_id": 1}, {"$inc": {"n": 10}}, session=other)
        with raises_code("NoSuchTransaction"):
            coll.update_one({"_id": 1}, {"$inc": {"n": 1}}, session=session)
    assert coll.find_one({"_id": 1})["n"] == 10
    assert (
        client.admin.command("getParameter", 1, transactionLifetimeLimitSeconds=1)[
            "transactionLifetimeLimitSeconds"
        ]
        == 1
    )


def test_a_transaction_larger_than_a_log_entry_commits_as_a_chain(start_replica_set):
    rs = start_replica_set(members=3)
    client = rs.client()
    coll = client.big.c
    coll.insert_one({"_id": 0, "v": 0})
    megabyte = "x" * (1 << 20)
    with client.start_session() as session:
        session.start_transaction(write_concern=WriteConcern(w="majority"))
        coll.update_one({"_id": 0}, {"$set": {"v": 1}}, session=session)
        # 24 MB: six chunks, the first five staged before the commit entry.
        coll.insert_many([{"_id": i, "s": megabyte} for i in range(1, 25)], session=session)
        client.big.create_collection("side", session=session)
        client.big.side.insert_one({"_id": 1}, session=session)
        # Nothing is visible before the commit, staged chunks included.
        assert coll.count_documents({}) == 1
        session.commit_transaction()
    assert coll.count_documents({}) == 25
    assert coll.find_one({"_id": 0}) == {"_id": 0, "v": 1}
    assert client.big.side.count_documents({}) == 1
    # The staged chunks went in the commit's batch, on every member.
    secondary = ReadPreference.SECONDARY
    with client.start_session(causal_consistency=True) as session:
        coll.find_one({}, session=session)
        on_secondary = coll.with_options(read_preference=secondary)
        assert on_secondary.count_documents({}, session=session) == 25
        chunks = client.config["system.transactionChunks"].with_options(read_preference=secondary)
        assert chunks.count_documents({}, session=session) == 0
    assert client.config["system.transactionChunks"].count_documents({}) == 0


def test_a_transaction_is_bounded_in_size(start_replica_set):
    limit = ["--setParameter", f"transactionSizeLimitBytes={8 << 20}"]
    client = start_replica_set(members=1, extra_args=limit).client()
    assert client.admin.command("getParameter", 1, transactionSizeLimitBytes=1)[
        "transactionSizeLimitBytes"
    ] == (8 << 20)
    coll = client.big.c
    coll.insert_one({"_id": 0})
    megabyte = "x" * (1 << 20)
    with client.start_session() as session:
        session.start_transaction()
        with raises_code("TransactionTooLarge"):
            for i in range(1, 40):
                coll.insert_one({"_id": i, "s": megabyte}, session=session)
        with raises_code("NoSuchTransaction"):
            session.commit_transaction()
    assert coll.count_documents({}) == 1


def test_malformed_transaction_statements_get_mongodbs_errors(client):
    db = client.shop
    lsid = {"id": bson.Binary(b"0123456789abcdef", 4)}
    statement = {"lsid": lsid, "txnNumber": bson.Int64(1), "autocommit": False}
    with raises_code("InvalidOptions"):
        db.command("find", "c", lsid=lsid, txnNumber=bson.Int64(1), autocommit=True)
    with raises_code("InvalidOptions"):
        db.command({"find": "c", **statement, "startTransaction": False})
    with raises_code("InvalidOptions"):
        db.command({"find": "c", "lsid": lsid, "autocommit": False})
    with raises_code("TypeMismatch"):
        db.command({"find": "c", **statement, "autocommit": "no"})
    with raises_code("InvalidOptions"):
        db.command(
            {
                "find": "c",
                **statement,
                "startTransaction": True,
                "readConcern": {"level": "available"},
            }
        )
    db.command({"find": "c", **statement, "txnNumber": bson.Int64(2), "startTransaction": True})
    with raises_code("InvalidOptions"):
        db.command(
            {
                "insert": "c",
                "documents": [{}],
                **statement,
                "txnNumber": bson.Int64(2),
                "writeConcern": {"w": 1},
            }
        )
    with raises_code("InvalidOptions"):
        client.admin.command("commitTransaction")
    with raises_code("TypeMismatch"):
        db.command("find", "c", readConcern={"level": "snapshot", "atClusterTime": 5})


def test_malformed_apply_ops_get_mongodbs_errors(client):
    with raises_code("FailedToParse"):
        client.admin.command("applyOps", 1)
    with raises_code("FailedToParse"):
        client.admin.command("applyOps", [{"ns": "a.b", "o": {"_id": 1}}])
    with raises_code("BadValue"):
        client.admin.command("applyOps", [{"op": "x", "ns": "a.b", "o": {"_id": 1}}])
    with raises_code("InvalidNamespace"):
        client.admin.command("applyOps", [{"op": "i", "ns": "nodot", "o": {"_id": 1}}])
    with raises_code("FailedToParse"):
        client.admin.command("applyOps", [{"op": "i", "ns": "a.b", "o": {"x": 1}}])
    with raises_code("TypeMismatch"):
        client.admin.command(
            "applyOps",
            [{"op": "d", "ns": "a.b", "o": {"_id": 1}, "preImageHash": "h"}],
        )
    assert client.a.b.count_documents({}) == 0
    # A commit entry naming staged chunks: a count, the transaction's session, chunks
    # that exist.
    op = [{"op": "i", "ns": "a.b", "o": {"_id": 1}}]
    with raises_code("BadValue"):
        client.admin.command("applyOps", op, stagedChunks=0)
    with raises_code("FailedToParse"):
        client.admin.command("applyOps", op, stagedChunks=1)
    lsid = {"id": bson.Binary(b"0123456789abcdef", 4)}
    with raises_code("NoSuchTransaction"):
        client.admin.command("applyOps", op, stagedChunks=1, lsid=lsid, txnNumber=bson.Int64(7))
    assert client.a.b.count_documents({}) == 0
