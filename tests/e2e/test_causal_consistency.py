"""Causal consistency on a replica set: every reply carries `operationTime` and
`$clusterTime`, and a read with `afterClusterTime` waits until the member has applied
that time, so a causally consistent session reads its own writes from a secondary.
"""

from __future__ import annotations

import bson
import pytest
from pymongo import ReadPreference

from helpers import raises_code


@pytest.fixture
def cluster(start_replica_set):
    return start_replica_set(members=3)


def test_replies_carry_operation_time_and_cluster_time(cluster):
    client = cluster.client()
    reply = client.test.command("insert", "c", documents=[{"_id": 1}])
    assert isinstance(reply["operationTime"], bson.Timestamp)
    assert reply["$clusterTime"]["clusterTime"] == reply["operationTime"]
    assert set(reply["$clusterTime"]["signature"]) == {"hash", "keyId"}
    later = client.test.command("find", "c")
    assert later["operationTime"] >= reply["operationTime"]


def test_a_causal_session_reads_its_own_writes_on_a_secondary(cluster):
    client = cluster.client()
    writes = client.test.c
    reads = client.test.get_collection("c", read_preference=ReadPreference.SECONDARY)
    with client.start_session(causal_consistency=True) as session:
        for i in range(100):
            writes.insert_one({"_id": i, "n": i}, session=session)
            assert reads.find_one({"_id": i}, session=session) == {"_id": i, "n": i}
            writes.update_one({"_id": i}, {"$inc": {"n": 1}}, session=session)
            assert reads.count_documents({"_id": i, "n": i + 1}, session=session) == 1


def test_a_cluster_time_not_reached_in_time_is_max_time_ms_expired(cluster):
    client = cluster.client()
    future = bson.Timestamp(2**31, 2**31)
    with raises_code("MaxTimeMSExpired"):
        client.test.command("find", "c", readConcern={"afterClusterTime": future}, maxTimeMS=200)
    with raises_code("TypeMismatch"):
        client.test.command("find", "c", readConcern={"afterClusterTime": 5})


def test_a_standalone_reply_has_no_cluster_time(client):
    reply = client.admin.command("ping")
    assert "operationTime" not in reply and "$clusterTime" not in reply
