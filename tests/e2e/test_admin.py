"""Administrative and catalog commands, as tools and drivers call them.

mongosh, Compass, monitoring agents and ORMs issue these on connect or on demand
(buildInfo, getParameter, getLog, serverStatus, listDatabases, collStats, ...), and
read specific fields from the replies. The expected shapes and codes are those of a
MongoDB 8.0 standalone.
"""

from __future__ import annotations

import datetime
import re
import socket
import uuid

import bson
import pytest
from pymongo.errors import OperationFailure

import wire
from helpers import bson_size, raises_code, wait_until

COMMANDS_WE_SERVE = [
    "aggregate", "buildInfo", "collStats", "connectionStatus", "count", "create",
    "dbStats", "delete", "distinct", "drop", "dropDatabase", "endSessions", "find",
    "findAndModify", "getCmdLineOpts", "getLog", "getMore", "getParameter", "hello",
    "hostInfo", "insert", "isMaster", "killCursors", "listCollections", "listCommands",
    "listDatabases", "ping", "renameCollection", "serverStatus", "update", "validate",
    "whatsmyuri",
]  # fmt: skip


def test_build_info_claims_mongodb_8_0(client):
    info = client.admin.command("buildInfo")
    assert re.fullmatch(r"8\.0\.\d+", info["version"]), info["version"]
    assert info["versionArray"][:3] == [int(p) for p in info["version"].split(".")]
    assert len(info["versionArray"]) == 4
    assert info["maxBsonObjectSize"] == 16 * 1024 * 1024
    assert info["bits"] == 64
    assert isinstance(info["gitVersion"], str)
    assert client.server_info()["version"] == info["version"]


@pytest.mark.parametrize("database", ["admin", "test", "anything"])
def test_ping(client, database):
    assert client[database].command("ping")["ok"] == 1


def fcv(client):
    reply = client.admin.command({"getParameter": 1, "featureCompatibilityVersion": 1})
    return reply["featureCompatibilityVersion"]["version"]


def test_feature_compatibility_version_starts_at_8_0(client):
    assert fcv(client) == "8.0"
    assert client.server_info()["version"].startswith("8.0.")


def test_set_feature_compatibility_version_needs_confirm_and_survives_a_restart(start_server):
    server = start_server()
    with server.client() as client:
        admin = client.admin
        # Re-setting the current version needs no confirmation.
        assert admin.command({"setFeatureCompatibilityVersion": "8.0"})["ok"] == 1
        with pytest.raises(OperationFailure) as refused:
            admin.command({"setFeatureCompatibilityVersion": "7.0"})
        assert refused.value.code == 7369100
        with pytest.raises(OperationFailure) as refused:
            admin.command({"setFeatureCompatibilityVersion": "7.0", "confirm": 0})
        assert refused.value.code == 7369100
        assert admin.command({"setFeatureCompatibilityVersion": "7.0", "confirm": 1})["ok"] == 1
        assert fcv(client) == "7.0"
        # Kept where mongod keeps it.
        stored = admin["system.version"].find_one({"_id": "featureCompatibilityVersion"})
        assert stored == {"_id": "featureCompatibilityVersion", "version": "7.0"}
    server.restart()
    with server.client() as client:
        assert fcv(client) == "7.0"
        client.admin.command({"setFeatureCompatibilityVersion": "8.0", "confirm": True})
        assert fcv(client) == "8.0"


@pytest.mark.parametrize(
    "command, code",
    [
        ({"setFeatureCompatibilityVersion": "8.2", "confirm": True}, 4926900),
        ({"setFeatureCompatibilityVersion": "8.0.0", "confirm": True}, 4926900),
        ({"setFeatureCompatibilityVersion": " 7.0", "confirm": True}, 4926900),
        ({"setFeatureCompatibilityVersion": 8.0, "confirm": True}, 14),
        ({"setFeatureCompatibilityVersion": None, "confirm": True}, 40414),
        ({"setFeatureCompatibilityVersion": "8.0", "confirm": "true"}, 14),
        ({"setFeatureCompatibilityVersion": "8.0", "confrim": True}, 40415),
        ({"setParameter": 1, "featureCompatibilityVersion": "8.0"}, 20),
    ],
)
def test_set_feature_compatibility_version_errors(client, command, code):
    with pytest.raises(OperationFailure) as refused:
        client.admin.command(command)
    assert refused.value.code == code
    assert fcv(client) == "8.0"


def test_set_feature_compatibility_version_only_on_admin(client):
    with pytest.raises(OperationFailure) as refused:
        client.test.command({"setFeatureCompatibilityVersion": "8.0", "confirm": True})
    assert refused.value.code == 13


def test_set_parameter_changes_the_log_verbosity(start_server):
    server = start_server()
    with server.client() as client:
        admin = client.admin
        # The command component at verbosity 1: each command is logged before it runs.
        reply = admin.command("setParameter", 1, logComponentVerbosity={"command": 1})
        assert reply["ok"] == 1
        client.test.command("ping")
        wait_until(lambda: "about to run the command ping" in server.log_text(), what="log")
        verbosity = admin.command("getParameter", 1, logComponentVerbosity=1)
        assert verbosity["logComponentVerbosity"]["command"] == {"verbosity": 1}
        assert verbosity["logComponentVerbosity"]["network"]["asio"] == {"verbosity": -1}
        # Back to the default: no more of them.
        admin.command("setParameter", 1, logComponentVerbosity={"command": -1})
        client.test.command("dbStats")
        client.test.command("ping")
        assert "about to run the command dbStats" not in server.log_text()
        assert admin.command("setParameter", 1, logLevel=2)["was"] == 0
        assert admin.command("getParameter", 1, logLevel=1)["logLevel"] == 2
        for bad, code in [
            ({"port": 1}, "InvalidOptions"),
            ({"nope": 1}, "InvalidOptions"),
            ({"logLevel": -1}, "BadValue"),
            ({"logComponentVerbosity": {"nope": 1}}, "BadValue"),
            ({"automationServiceDescriptor": 5}, "TypeMismatch"),
        ]:
            with raises_code(code):
                admin.command("setParameter", 1, **bad)


def test_get_cmd_line_opts_reports_our_flags(client, server):
    reply = client.admin.command("getCmdLineOpts")
    assert reply["argv"][1:] == server.argv[1:]
    assert reply["parsed"]["net"]["port"] == server.port
    assert reply["parsed"]["storage"]["dbPath"] == str(server.dbpath)


def test_host_info(client):
    info = client.admin.command("hostInfo")
    assert info["system"]["hostname"].split(":")[0] == socket.gethostname()
    assert info["system"]["numCores"] >= 1
    assert info["system"]["memSizeMB"] > 0
    assert 0 < info["system"]["memLimitMB"] <= info["system"]["memSizeMB"]
    for count in [
        "numPhysicalCores",
        "numCpuSockets",
        "numNumaNodes",
        "numCoresAvailableToProcess",
    ]:
        assert info["system"][count] >= 1, count
    assert info["extra"]["pageSize"] in (4096, 16384, 65536)
    assert info["extra"]["numPages"] > 0 and info["extra"]["maxOpenFiles"] > 0
    assert info["extra"]["versionString"].startswith("Linux version")
    assert isinstance(info["system"]["currentTime"], datetime.datetime)
    assert info["os"]["type"] == "Linux"


def test_whatsmyuri_is_the_client_address(server):
    with wire.RawConnection(server.port) as conn:
        reply = conn.command({"whatsmyuri": 1, "$db": "admin"})
        host, port = conn.sock.getsockname()
    assert reply.doc["you"] == f"{host}:{port}"


def test_get_log(client):
    assert {"global", "startupWarnings"} <= set(client.admin.command("getLog", "*")["names"])
    for name in ("global", "startupWarnings"):
        log = client.admin.command("getLog", name)
        assert isinstance(log["totalLinesWritten"], int)
        assert all(isinstance(line, str) for line in log["log"])


def test_server_status_sections(client, server):
    status = client.admin.command("serverStatus")
    assert status["version"] == client.server_info()["version"]
    assert status["pid"] == server.proc.pid
    assert status["uptime"] >= 0 and status["uptimeMillis"] >= 0
    assert isinstance(status["localTime"], datetime.datetime)
    connections = status["connections"]
    assert connections["current"] >= 1
    assert connections["available"] > 0
    assert connections["totalCreated"] >= connections["current"]
    assert set(status["opcounters"]) >= {
        "insert",
        "query",
        "update",
        "delete",
        "getmore",
        "command",
    }
    assert status["mem"]["bits"] == 64
    assert status["mem"]["resident"] > 0
    assert status["process"] == "mongod"
    extra = status["extra_info"]
    assert isinstance(extra["page_faults"], int) and extra["page_faults"] >= 0
    # The process has run: /proc/self/stat's CPU times are read, not zeros.
    assert extra["user_time_us"] > 0
    # A session the client used is held, as mongod's session cache holds it.
    with client.start_session() as session:
        client.admin.command("ping", session=session)
        held = client.admin.command("serverStatus", session=session)
    assert held["logicalSessionRecordCache"]["activeSessionsCount"] >= 1


def test_server_status_turns_sections_off_and_on(client):
    """A section given a false value (false, 0, null) is left out; mirroredReads, which
    mongod leaves out, is there when asked for by any true value."""
    status = client.admin.command(
        {"serverStatus": 1, "metrics": 0, "locks": False, "network": None}
    )
    assert not {"metrics", "locks", "network"} & set(status)
    assert "opcounters" in status and "mirroredReads" not in status
    assert client.admin.command({"serverStatus": 1, "mirroredReads": "yes"})["mirroredReads"]
    # Fields that are no section stay.
    assert "uptime" in client.admin.command({"serverStatus": 1, "uptime": 0})


def test_server_status_counts_the_errors_commands_answer(client, db):
    """asserts.user counts the commands that answered with an error."""

    def user_asserts():
        return client.admin.command("serverStatus")["asserts"]["user"]

    before = user_asserts()
    for _ in range(3):
        with pytest.raises(OperationFailure):
            db.command("find", "c", bogus=1)
    assert user_asserts() - before == 3
    assert set(client.admin.command("serverStatus")["asserts"]) == {
        "regular", "warning", "msg", "user", "tripwire", "rollovers",
    }  # fmt: skip


def test_server_status_counts_operations(client, coll):
    def counters():
        return client.admin.command("serverStatus")["opcounters"]

    before = counters()
    coll.insert_many([{"_id": i} for i in range(5)])
    list(coll.find().batch_size(2))  # one find, then getMores
    coll.update_one({"_id": 1}, {"$set": {"x": 1}})
    coll.delete_one({"_id": 2})
    after = counters()
    assert after["insert"] - before["insert"] == 5  # counted per document
    assert after["query"] - before["query"] == 1
    assert after["getmore"] - before["getmore"] >= 1
    assert after["update"] - before["update"] == 1
    assert after["delete"] - before["delete"] == 1
    assert after["command"] > before["command"]


def test_list_commands_names_what_we_serve(client):
    commands = client.admin.command("listCommands")["commands"]
    missing = [name for name in COMMANDS_WE_SERVE if name not in commands]
    assert not missing


def test_connection_status_without_auth(client):
    info = client.admin.command("connectionStatus")["authInfo"]
    assert info["authenticatedUsers"] == []
    assert info["authenticatedUserRoles"] == []


def test_end_sessions(client):
    """Drivers make session ids themselves (a UUID) and end them in bulk."""
    session_ids = [{"id": bson.Binary(uuid.uuid4().bytes, 4)} for _ in range(3)]
    assert client.admin.command("endSessions", session_ids)["ok"] == 1


def test_start_session(client):
    session = client.admin.command("startSession")
    assert isinstance(session["id"]["id"], bson.Binary) and session["id"]["id"].subtype == 4
    assert session["timeoutMinutes"] == 30
    assert client.admin.command("endSessions", [session["id"]])["ok"] == 1


def test_list_databases(client, db):
    db["c"].insert_one({"x": 1})
    reply = client.admin.command("listDatabases")
    entry = next(d for d in reply["databases"] if d["name"] == db.name)
    assert entry["sizeOnDisk"] >= 0 and entry["empty"] is False
    assert reply["totalSize"] >= entry["sizeOnDisk"]
    assert db.name in client.list_database_names()

    names_only = client.admin.command("listDatabases", nameOnly=True)["databases"]
    assert {"name": db.name} in names_only
    assert all(set(d) == {"name"} for d in names_only)

    filtered = client.admin.command("listDatabases", filter={"name": db.name})["databases"]
    assert [d["name"] for d in filtered] == [db.name]


def test_list_collections(db):
    db.create_collection("a")
    db.create_collection("b")
    db["c"].insert_one({"x": 1})  # implicit creation
    assert sorted(db.list_collection_names()) == ["a", "b", "c"]

    reply = db.command("listCollections", filter={"name": "a"})
    assert reply["cursor"]["ns"] == f"{db.name}.$cmd.listCollections"
    (entry,) = reply["cursor"]["firstBatch"]
    assert entry["name"] == "a" and entry["type"] == "collection"
    assert entry["options"] == {}
    assert entry["info"]["readOnly"] is False
    assert entry["info"]["uuid"].subtype == 4
    assert entry["idIndex"] == {"v": 2, "key": {"_id": 1}, "name": "_id_"}

    names_only = db.command("listCollections", nameOnly=True)["cursor"]["firstBatch"]
    assert sorted(names_only, key=lambda e: e["name"]) == [
        {"name": n, "type": "collection"} for n in ("a", "b", "c")
    ]


def test_create_is_idempotent_but_refuses_other_options(db):
    assert db.command("create", "x")["ok"] == 1
    # MongoDB 7.0: an identical create succeeds; one with other options is refused.
    assert db.command("create", "x")["ok"] == 1
    with raises_code("NamespaceExists"):
        db.command("create", "x", validationLevel="moderate")
    assert db.list_collection_names() == ["x"]


def test_drop_collection(db):
    db["gone"].insert_many([{"_id": i} for i in range(3)])
    reply = db.command("drop", "gone")
    assert reply["ok"] == 1 and reply["nIndexesWas"] == 1 and reply["ns"] == f"{db.name}.gone"
    assert "gone" not in db.list_collection_names()
    assert db["gone"].count_documents({}) == 0


def test_drop_database(client, db):
    db["a"].insert_one({"x": 1})
    db["b"].insert_one({"x": 1})
    client.drop_database(db.name)
    assert db.name not in client.list_database_names()
    assert db.list_collection_names() == []


def test_rename_collection(client, db):
    db["src"].insert_many([{"_id": i} for i in range(4)])
    client.admin.command("renameCollection", f"{db.name}.src", to=f"{db.name}.dst")
    assert db.list_collection_names() == ["dst"]
    assert db["dst"].count_documents({}) == 4


def test_rename_collection_onto_existing_target(client, db):
    db["src"].insert_one({"_id": "from src"})
    db["dst"].insert_one({"_id": "from dst"})
    with raises_code("NamespaceExists"):
        client.admin.command("renameCollection", f"{db.name}.src", to=f"{db.name}.dst")
    client.admin.command("renameCollection", f"{db.name}.src", to=f"{db.name}.dst", dropTarget=True)
    assert list(db["dst"].find()) == [{"_id": "from src"}]
    assert db.list_collection_names() == ["dst"]


def test_rename_missing_collection(client, db):
    with raises_code("NamespaceNotFound"):
        client.admin.command("renameCollection", f"{db.name}.nope", to=f"{db.name}.dst")


def test_db_hash(client, db):
    db.a.insert_many([{"_id": 1}, {"_id": 2}])
    db.b.insert_one({"_id": 1})
    db.create_collection("capped", capped=True, size=4096)
    db.create_collection("view", viewOn="a", pipeline=[])
    first = db.command("dbHash")
    assert set(first["collections"]) == {"a", "b", "capped", "system.views"}
    assert first["capped"] == ["capped"]
    assert set(first["uuids"]) == set(first["collections"])
    assert db.command("dbHash")["md5"] == first["md5"]
    # The same documents, inserted in another order: the same hash.
    db.c.insert_many([{"_id": 2}, {"_id": 1}])
    assert db.command("dbHash")["collections"]["c"] == first["collections"]["a"]
    db.a.update_one({"_id": 1}, {"$set": {"x": 1}})
    second = db.command("dbHash", collections=["a"])
    assert list(second["collections"]) == ["a"]
    assert second["collections"]["a"] != first["collections"]["a"]
    with raises_code("BadValue"):
        db.command("dbHash", collections=[1])


def _sample(n: int) -> list[dict]:
    return [{"_id": i, "name": f"doc {i}", "tags": ["a"] * (i % 5)} for i in range(n)]


def test_coll_stats(db):
    docs = _sample(10)
    db["c"].insert_many(docs)
    stats = db.command("collStats", "c")
    assert stats["ns"] == f"{db.name}.c"
    assert stats["count"] == 10
    assert stats["size"] == sum(bson_size(d) for d in docs)  # uncompressed BSON bytes
    assert stats["avgObjSize"] > 0
    assert stats["nindexes"] == 1
    assert set(stats["indexSizes"]) == {"_id_"}


def test_storage_sizes_are_the_tables_on_disk(own_server):
    """storageSize, indexSizes and sizeOnDisk are the compressed tables under --dbpath
    (within 10 %), not the BSON bytes: a bulk insert goes straight to tables."""
    db = own_server.client()["sizes"]
    docs = [{"_id": i, "name": f"station {i % 500}", "v": i * 0.5} for i in range(100_000)]
    db["big"].insert_many(docs)
    db["big"].create_index("name")
    db["small"].insert_one({"_id": 1})  # in memory only: one allocation unit

    big = db.command("collStats", "big")
    assert big["size"] == sum(bson_size(d) for d in docs)
    assert 4096 < big["storageSize"] < big["size"] / 2  # compressed
    assert big["storageSize"] % 4096 == 0
    assert set(big["indexSizes"]) == {"_id_", "name_1"}
    assert big["totalIndexSize"] == sum(big["indexSizes"].values())
    assert big["totalSize"] == big["storageSize"] + big["totalIndexSize"]
    small = db.command("collStats", "small")
    assert (small["storageSize"], small["totalIndexSize"]) == (4096, 4096)
    # Figures are ints while they fit, as mongod's appendNumber writes them.
    assert type(small["count"]) is int and type(small["storageSize"]) is int
    assert db.command("collStats", "big", scale=1024)["storageSize"] == big["storageSize"] // 1024

    stats = db.command("dbStats")
    assert stats["storageSize"] == big["storageSize"] + small["storageSize"]
    assert stats["indexSize"] == big["totalIndexSize"] + small["totalIndexSize"]
    listed = own_server.client().admin.command("listDatabases")["databases"]
    entry = next(d for d in listed if d["name"] == "sizes")
    assert entry["sizeOnDisk"] == stats["totalSize"]

    # Every table file of the data (fjall's keyspaces; the journal apart) against what
    # the databases report: all their collections and indexes together.
    tables = sum(
        f.stat().st_size for f in own_server.dbpath.glob("keyspaces/*/tables/*") if f.is_file()
    )
    reported = sum(d["sizeOnDisk"] for d in listed)
    assert abs(reported - tables) <= 0.1 * tables, (reported, tables)


def test_db_stats(db):
    docs = _sample(7)
    db["a"].insert_many(docs)
    db["b"].insert_one({"_id": 1})
    stats = db.command("dbStats")
    assert stats["db"] == db.name
    assert stats["collections"] == 2
    assert stats["objects"] == 8
    assert stats["dataSize"] == sum(bson_size(d) for d in docs) + bson_size({"_id": 1})
    assert stats["indexes"] == 2


def test_validate(db):
    db["c"].insert_many(_sample(10))
    result = db.command("validate", "c")
    assert result["ns"] == f"{db.name}.c"
    assert result["valid"] is True
    assert result["nrecords"] == 10
    assert result["nInvalidDocuments"] == 0
    assert result["keysPerIndex"] == {"_id_": 10}
    assert result["errors"] == []
    # MongoDB 8.0's fields; `advice` only when not valid. Counts are ints, as mongod
    # appends them.
    assert list(result) == [
        "valid", "repaired", "repairMode", "ns", "uuid", "warnings", "errors",
        "extraIndexEntries", "missingIndexEntries", "nInvalidDocuments",
        "nNonCompliantDocuments", "nrecords", "corruptRecords", "nIndexes", "keysPerIndex",
        "indexDetails", "ok",
    ]  # fmt: skip
    assert result["repairMode"] == "None"
    # An int, not a long (pymongo reads a long as bson.Int64).
    assert type(result["nrecords"]) is int and type(result["keysPerIndex"]["_id_"]) is int
    assert result["indexDetails"] == {
        "_id_": {"valid": True, "spec": {"v": 2, "key": {"_id": 1}, "name": "_id_"}}
    }
    # A metadata check counts no documents; it takes no other option, and a standalone
    # validates in the foreground only.
    metadata = db.command("validate", "c", metadata=True)
    assert "nrecords" not in metadata and "keysPerIndex" not in metadata
    for options, code in [
        ({"metadata": True, "full": True}, 72),
        ({"checkBSONConformance": True, "repair": True}, 72),
        ({"background": True, "full": True}, 72),
        ({"background": 1}, 115),
    ]:
        with pytest.raises(OperationFailure) as info:
            db.command("validate", "c", **options)
        assert info.value.code == code, options


def test_validate_missing_collection(db):
    with raises_code("NamespaceNotFound"):
        db.command("validate", "missing")


def test_validate_db_metadata_names_what_api_version_1_forbids(client, db):
    db.c.create_index([("t", "text")])
    db.c.create_index("s", sparse=True)
    db.c.create_index("plain")
    db.command("create", "v", viewOn="c", pipeline=[{"$indexStats": {}}])
    reply = client.admin.command(
        "validateDBMetadata", 1, db=db.name, apiParameters={"version": "1", "strict": True}
    )
    namespaces = sorted((e["ns"], e["codeName"]) for e in reply["apiVersionErrors"])
    assert namespaces == [
        (f"{db.name}.c", "APIStrictError"),
        (f"{db.name}.c", "APIStrictError"),
        (f"{db.name}.v", "APIStrictError"),
    ]
    lenient = client.admin.command(
        "validateDBMetadata", 1, db=db.name, apiParameters={"version": "1"}
    )
    assert lenient["apiVersionErrors"] == []
    with raises_code("Location40414"):
        client.admin.command("validateDBMetadata", 1, db=db.name)
    # Names as mongod checks them here; it reads only at `local` and takes no write
    # concern.
    parameters = {"version": "1", "strict": True}
    assert (
        client.admin.command(
            "validateDBMetadata", 1, db=db.name, collection="$x", apiParameters=parameters
        )["apiVersionErrors"]
        == []
    )
    for fields, code in [
        ({"db": "a.b"}, 73),
        ({"db": "a b"}, 13280),
        ({"collection": ""}, 73),
        ({"apiParameters": {"version": "1", "strict": 1}}, 14),
        ({"readConcern": {"level": "majority"}}, 72),
        ({"writeConcern": {"w": 1}}, 72),
    ]:
        with pytest.raises(OperationFailure) as info:
            client.admin.command({"validateDBMetadata": 1, "apiParameters": parameters, **fields})
        assert info.value.code == code, fields


def test_conn_pool_stats_on_a_standalone_has_no_pools(client, db):
    """connPoolStats: a standalone opens no connections of its own; the command's value
    and other fields are ignored, on any database, as mongod ignores them."""
    for stats in (
        client.admin.command("connPoolStats"),
        db.command({"connPoolStats": "x", "foo": [1]}),
    ):
        assert stats["pools"] == {} and stats["hosts"] == {}
        assert stats["totalCreated"] == stats["totalInUse"] == stats["totalAvailable"] == 0
        assert stats["numClientConnections"] == 0
