"""mongod's test hooks as drivers' test suites use them: `configureFailPoint` with
`failCommand` (with `--setParameter enableTestCommands=1` only): error codes and labels,
closed connections, held commands, write concern errors, `times`/`skip`, `appName`.
"""

from __future__ import annotations

import time

import pytest
from pymongo.errors import AutoReconnect, NotPrimaryError, OperationFailure, WriteConcernError

TEST_COMMANDS = ("--setParameter", "enableTestCommands=1")


def fail_command(client, mode, **data):
    return client.admin.command("configureFailPoint", "failCommand", mode=mode, data=data)


def off(client):
    client.admin.command("configureFailPoint", "failCommand", mode="off")


def test_fail_points_need_test_commands(start_server):
    with start_server().client() as client:
        with pytest.raises(OperationFailure) as refused:
            fail_command(client, "alwaysOn", failCommands=["find"], errorCode=2)
        assert refused.value.code == 59
        assert client.admin.command("getParameter", 1, enableTestCommands=1) == {
            "enableTestCommands": False,
            "ok": 1.0,
        }


def test_fail_command_errors_labels_and_counts(start_server):
    server = start_server(*TEST_COMMANDS)
    with server.client(retryReads=False, retryWrites=False) as client:
        assert client.admin.command("getParameter", 1, enableTestCommands=1)["enableTestCommands"]
        client.test.c.insert_one({"_id": 1})
        fail_command(
            client, {"times": 2}, failCommands=["find"], errorCode=91, errorLabels=["Custom"]
        )
        for _ in range(2):
            # pymongo raises its "not primary" error for mongod's shutdown codes.
            with pytest.raises(NotPrimaryError) as failed:
                client.test.c.find_one()
            assert failed.value.details["code"] == 91
            assert failed.value.details["codeName"] == "ShutdownInProgress"
            assert failed.value.details["errorLabels"] == ["Custom"]
            # A state change error says at which topology version it was seen.
            assert "topologyVersion" in failed.value.details
        assert client.test.c.find_one() == {"_id": 1}, "off after two times"

        # skip: the first command passes, the following fail.
        reply = fail_command(client, {"skip": 1}, failCommands=["count"], errorCode=2)
        assert reply["count"] >= 2
        assert client.test.command("count", "c")["n"] == 1
        with pytest.raises(OperationFailure):
            client.test.command("count", "c")
        off(client)
        assert client.test.command("count", "c")["n"] == 1

        # A write concern error is added to the reply of a write that is done.
        fail_command(
            client,
            {"times": 1},
            failCommands=["insert"],
            writeConcernError={"code": 64, "errmsg": "waiting for replication timed out"},
        )
        with pytest.raises(WriteConcernError) as concern:
            client.test.c.insert_one({"_id": 2})
        assert concern.value.code == 64
        assert client.test.c.count_documents({}) == 2


def test_fail_command_closes_holds_and_selects_by_app_name(start_server):
    server = start_server(*TEST_COMMANDS)
    with (
        server.client() as admin,
        server.client(appName="victim", retryReads=False) as victim,
        server.client(appName="bystander", retryReads=False) as bystander,
    ):
        victim.test.c.insert_one({"_id": 1})
        fail_command(
            admin, "alwaysOn", failCommands=["find"], closeConnection=True, appName="victim"
        )
        with pytest.raises(AutoReconnect):
            victim.test.c.find_one()
        assert bystander.test.c.find_one() == {"_id": 1}
        off(admin)
        assert victim.test.c.find_one() == {"_id": 1}, "a new connection works"

        fail_command(
            admin, {"times": 1}, failCommands=["find"], blockConnection=True, blockTimeMS=300
        )
        started = time.monotonic()
        assert victim.test.c.find_one() == {"_id": 1}
        assert time.monotonic() - started >= 0.3


def test_bad_fail_point_configurations_are_refused(start_server):
    server = start_server(*TEST_COMMANDS)
    with server.client() as client:
        cases = [
            {"configureFailPoint": "noSuchFailPoint", "mode": "alwaysOn"},
            {"configureFailPoint": "failCommand", "mode": "sometimes", "data": {}},
            {"configureFailPoint": "failCommand", "mode": "alwaysOn"},
            {"configureFailPoint": "failCommand", "mode": "alwaysOn", "data": {"x": 1}},
            {"configureFailPoint": "failCommand", "mode": {"times": -1}, "data": {}},
        ]
        for body in cases:
            with pytest.raises(OperationFailure) as refused:
                client.admin.command(body)
            assert refused.value.code == 2, body
        with pytest.raises(OperationFailure) as not_admin:
            client.test.command({"configureFailPoint": "failCommand", "mode": "off"})
        assert not_admin.value.code == 13
