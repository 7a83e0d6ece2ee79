"""Access control end to end: SCRAM-SHA-1/256 through pymongo, users and roles, every
built-in role allowed and refused on a table of commands, cursor ownership, the
localhost exception, TLS (server certificates, client certificates, MONGODB-X509), a
replica set whose members hold a key file (and one that does not), and a storm of
clients authenticating at once.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import os
import resource
import struct

import bson
import pymongo
import pytest
from certificates import Certificates
from pymongo.errors import OperationFailure, ServerSelectionTimeoutError

from helpers import raises_code, wait_until
from wire import RawConnection

ROOT = ("root", "r00t-pw")


def authed(server, user, password, **kwargs) -> pymongo.MongoClient:
    return server.client(username=user, password=password, authSource="admin", **kwargs)


@pytest.fixture(scope="module")
def secured(basalt_binary, tmp_path_factory):
    """One server with --auth, its first user (root) made through the localhost
    exception, and a user for each built-in role the tests try."""
    from basalt_server import BasaltServer

    directory = tmp_path_factory.mktemp("secured")
    srv = BasaltServer(
        basalt_binary, directory / "data", directory / "basalt.log", extra_args=["--auth"]
    ).start()
    srv.client().admin.command("createUser", ROOT[0], pwd=ROOT[1], roles=["root"])
    admin = authed(srv, *ROOT)
    for role, db in [
        ("read", "shop"),
        ("readWrite", "shop"),
        ("dbAdmin", "shop"),
        ("userAdmin", "shop"),
        ("dbOwner", "shop"),
        ("clusterMonitor", "admin"),
        ("readAnyDatabase", "admin"),
        ("clusterAdmin", "admin"),
    ]:
        admin.admin.command("createUser", role, pwd="pw-" + role, roles=[{"role": role, "db": db}])
    admin.shop.orders.insert_many([{"_id": i, "total": i * 10} for i in range(5)])
    admin.other.things.insert_one({"_id": 1})
    yield srv
    assert not srv.panics(), "\n".join(srv.panics())
    srv.stop()


def role_client(server, role: str) -> pymongo.MongoClient:
    return authed(server, role, "pw-" + role)


def test_before_authentication_only_the_handshake_runs(secured):
    anonymous = secured.client()
    assert anonymous.admin.command("ping")["ok"] == 1
    assert anonymous.admin.command("hello")["isWritablePrimary"]
    with raises_code("Unauthorized") as failure:
        anonymous.shop.orders.find_one()
    assert "requires authentication" in str(failure.value)
    # The localhost exception closed with the first user.
    with raises_code("Unauthorized"):
        anonymous.admin.command("createUser", "late", pwd="x", roles=["root"])
    status = anonymous.admin.command("connectionStatus")["authInfo"]
    assert status == {"authenticatedUsers": [], "authenticatedUserRoles": []}


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-1", "SCRAM-SHA-256"])
def test_both_scram_mechanisms_authenticate(secured, mechanism):
    client = authed(secured, *ROOT, authMechanism=mechanism)
    assert client.shop.orders.count_documents({}) == 5
    info = client.admin.command("connectionStatus", showPrivileges=True)["authInfo"]
    assert info["authenticatedUsers"] == [{"user": "root", "db": "admin"}]
    assert info["authenticatedUserRoles"] == [{"role": "root", "db": "admin"}]
    assert info["authenticatedUserPrivileges"]


def test_the_uri_form_with_auth_source_works(secured):
    uri = f"mongodb://{ROOT[0]}:{ROOT[1]}@127.0.0.1:{secured.port}/shop?authSource=admin"
    with pymongo.MongoClient(uri, serverSelectionTimeoutMS=5000) as client:
        assert client.get_default_database().orders.estimated_document_count() == 5


def test_wrong_credentials_fail_alike_and_are_logged_without_secrets(secured):
    for user, password in [("root", "wrong-password"), ("nobody", "whatever-pw")]:
        client = authed(secured, user, password, serverSelectionTimeoutMS=2000)
        with pytest.raises(OperationFailure) as failure:
            client.admin.command("ping")
        assert failure.value.code == 18
        assert failure.value.details["errmsg"] == "Authentication failed."
        assert failure.value.details["codeName"] == "AuthenticationFailed"
    log = secured.log_text()
    assert log.count("Authentication failed") >= 2
    for secret in ["wrong-password", "whatever-pw", ROOT[1]]:
        assert secret not in log


def test_stored_credentials_are_mongodbs_and_hold_no_password(secured):
    admin = authed(secured, *ROOT)
    user = admin.admin.command("usersInfo", "read", showCredentials=True)["users"][0]
    assert user["mechanisms"] == ["SCRAM-SHA-1", "SCRAM-SHA-256"]
    sha1, sha256 = user["credentials"]["SCRAM-SHA-1"], user["credentials"]["SCRAM-SHA-256"]
    assert sha1["iterationCount"] == 10000 and sha256["iterationCount"] == 15000
    assert len(base64.b64decode(sha1["salt"])) == 16
    assert len(base64.b64decode(sha256["salt"])) == 28
    # The stored key is what SCRAM derives from the password: a client that knows it
    # can prove it, and the document does not contain the password itself.
    salted = hashlib.pbkdf2_hmac("sha256", b"pw-read", base64.b64decode(sha256["salt"]), 15000)
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    assert base64.b64decode(sha256["storedKey"]) == hashlib.sha256(client_key).digest()
    raw = admin.admin["system.users"].find_one({"user": "read"})
    assert "pw-read" not in str(raw)
    # Without showCredentials, none are shown.
    assert "credentials" not in admin.admin.command("usersInfo", "read")["users"][0]


# (role, command builder, expected to be allowed). The builders get a client of the
# role's user; every pair runs against the same server.
ROLE_TABLE = [
    ("read", lambda c: c.shop.orders.find_one(), True),
    ("read", lambda c: c.shop.orders.insert_one({"x": 1}), False),
    ("read", lambda c: c.other.things.find_one(), False),
    ("read", lambda c: c.shop.command("dbStats"), True),
    ("read", lambda c: c.shop.orders.drop_index("nope"), False),
    ("readWrite", lambda c: c.shop.scratch.insert_one({"x": 1}), True),
    ("readWrite", lambda c: c.shop.scratch.update_one({}, {"$set": {"y": 1}}), True),
    ("readWrite", lambda c: c.shop.scratch.delete_many({}), True),
    ("readWrite", lambda c: c.shop.command("dropDatabase"), False),
    ("readWrite", lambda c: c.admin.command("serverStatus"), False),
    ("dbAdmin", lambda c: c.shop.orders.create_index("total"), True),
    ("dbAdmin", lambda c: c.shop.command("collStats", "orders"), True),
    ("dbAdmin", lambda c: c.shop.orders.find_one(), False),
    ("userAdmin", lambda c: c.shop.command("usersInfo", 1), True),
    ("userAdmin", lambda c: c.shop.orders.find_one(), False),
    ("dbOwner", lambda c: c.shop.owned.insert_one({}), True),
    ("dbOwner", lambda c: c.shop.command("createUser", "dbo_made", pwd="x", roles=["read"]), True),
    ("dbOwner", lambda c: c.other.things.find_one(), False),
    ("clusterMonitor", lambda c: c.admin.command("serverStatus"), True),
    ("clusterMonitor", lambda c: c.admin.command("getCmdLineOpts"), True),
    ("clusterMonitor", lambda c: c.shop.orders.find_one(), False),
    ("readAnyDatabase", lambda c: c.other.things.find_one(), True),
    ("readAnyDatabase", lambda c: c.list_database_names(), True),
    ("readAnyDatabase", lambda c: c.other.things.insert_one({}), False),
    ("readAnyDatabase", lambda c: c.admin["system.users"].find_one(), False),
    ("clusterAdmin", lambda c: c.admin.command("getParameter", "*"), True),
    ("clusterAdmin", lambda c: c.shop.orders.find_one(), False),
]


@pytest.mark.parametrize(
    ("role", "run", "allowed"),
    ROLE_TABLE,
    ids=[f"{r}-{i}-{'allowed' if a else 'refused'}" for i, (r, _, a) in enumerate(ROLE_TABLE)],
)
def test_built_in_roles_allow_and_refuse(secured, role, run, allowed):
    client = role_client(secured, role)
    if allowed:
        run(client)
    else:
        with pytest.raises(OperationFailure) as failure:
            run(client)
        assert failure.value.code == 13
        assert "not authorized on" in failure.value.details["errmsg"]


def test_listings_show_only_what_the_user_may_see(secured):
    reader = role_client(secured, "read")
    assert reader.list_database_names() == ["shop"]
    assert "orders" in reader.shop.list_collection_names()
    with raises_code("Unauthorized"):
        reader.admin.command("listDatabases", authorizedDatabases=False)
    with raises_code("Unauthorized"):
        reader.other.command("listCollections")
    # Asking for only the names it may see, as mongosh and drivers do, it sees none.
    listed = reader.other.command("listCollections", nameOnly=True, authorizedCollections=True)
    assert listed["cursor"]["firstBatch"] == []
    everything = authed(secured, *ROOT).list_database_names()
    assert {"admin", "shop", "other"} <= set(everything)


def test_a_cursor_answers_only_to_its_owner(secured):
    owner = authed(secured, *ROOT)
    reply = owner.shop.command("find", "orders", batchSize=1)
    cursor_id = reply["cursor"]["id"]
    assert cursor_id
    thief = role_client(secured, "read")
    with raises_code("Unauthorized") as failure:
        thief.shop.command("getMore", cursor_id, collection="orders")
    assert "not created by the authenticated user" in str(failure.value)
    with raises_code("Unauthorized"):
        thief.shop.command("killCursors", "orders", cursors=[cursor_id])
    more = owner.shop.command("getMore", cursor_id, collection="orders", batchSize=10)
    assert len(more["cursor"]["nextBatch"]) == 4


def test_custom_roles_grant_exactly_their_privileges_and_changes_apply_at_once(secured):
    admin = authed(secured, *ROOT)
    admin.shop.command(
        "createRole",
        "orderCounter",
        privileges=[{"resource": {"db": "shop", "collection": "orders"}, "actions": ["find"]}],
        roles=[],
    )
    admin.shop.command("createUser", "counter", pwd="pw-counter", roles=["orderCounter"])
    counter = secured.client(username="counter", password="pw-counter", authSource="shop")
    assert counter.shop.orders.count_documents({}) == 5
    with raises_code("Unauthorized"):
        counter.shop.scratch.find_one()
    info = admin.shop.command("rolesInfo", "orderCounter", showPrivileges=True)["roles"][0]
    assert info["isBuiltin"] is False
    assert info["privileges"][0]["actions"] == ["find"]
    # A change of the role reaches the connection already authenticated.
    admin.shop.command(
        "revokePrivilegesFromRole",
        "orderCounter",
        privileges=[{"resource": {"db": "shop", "collection": "orders"}, "actions": ["find"]}],
    )
    with raises_code("Unauthorized"):
        counter.shop.orders.find_one()
    admin.shop.command("grantRolesToRole", "orderCounter", roles=["read"])
    assert counter.shop.orders.find_one() is not None
    admin.shop.command("dropRole", "orderCounter")
    user = admin.shop.command("usersInfo", "counter")["users"][0]
    assert user["roles"] == []
    with raises_code("Unauthorized"):
        counter.shop.orders.find_one()


def test_user_management_errors_are_mongodbs(secured):
    admin = authed(secured, *ROOT)
    with pytest.raises(OperationFailure) as failure:
        admin.admin.command("createUser", "root", pwd="x", roles=[])
    assert failure.value.code == 51003
    assert failure.value.details["errmsg"] == 'User "root@admin" already exists'
    with raises_code("RoleNotFound"):
        admin.shop.command("createUser", "u1", pwd="x", roles=["noSuchRole"])
    with raises_code("UserNotFound"):
        admin.shop.command("dropUser", "ghost")
    with raises_code("InvalidRoleModification"):
        admin.shop.command("grantRolesToRole", "read", roles=["readWrite"])
    with raises_code("BadValue"):
        admin.shop.command("createUser", "nopwd", roles=[])
    admin.shop.command("createRole", "a", privileges=[], roles=[])
    admin.shop.command("createRole", "b", privileges=[], roles=["a"])
    with raises_code("InvalidRoleModification"):
        admin.shop.command("grantRolesToRole", "a", roles=["b"])
    assert admin.shop.command("dropAllRolesFromDatabase")["n"] == 2


def test_users_change_passwords_and_roles_and_are_dropped(secured):
    admin = authed(secured, *ROOT)
    admin.shop.command(
        "createUser", "temp", pwd="first-pw", roles=["read"], customData={"team": "a"}
    )
    temp = secured.client(username="temp", password="first-pw", authSource="shop")
    assert temp.shop.orders.find_one() is not None
    admin.shop.command("updateUser", "temp", pwd="second-pw", customData={"team": "b"})
    stale = secured.client(username="temp", password="first-pw", authSource="shop")
    with raises_code("AuthenticationFailed"):
        stale.shop.orders.find_one()
    fresh = secured.client(username="temp", password="second-pw", authSource="shop")
    admin.shop.command("grantRolesToUser", "temp", roles=["readWrite"])
    fresh.shop.scratch.insert_one({"by": "temp"})
    admin.shop.command("revokeRolesFromUser", "temp", roles=["readWrite"])
    with raises_code("Unauthorized"):
        fresh.shop.scratch.insert_one({"by": "temp"})
    info = admin.shop.command("usersInfo", "temp", showPrivileges=True)["users"][0]
    assert info["customData"] == {"team": "b"}
    assert {"role": "read", "db": "shop"} in info["inheritedRoles"]
    # A user may look at itself without viewUser.
    assert fresh.shop.command("usersInfo", "temp")["users"][0]["user"] == "temp"
    admin.shop.command("dropUser", "temp")
    with raises_code("Unauthorized"):
        fresh.shop.orders.find_one()


def test_authentication_restrictions_admit_only_their_addresses(secured):
    admin = authed(secured, *ROOT)
    admin.shop.command(
        "createUser",
        "fenced",
        pwd="pw-fenced",
        roles=["read"],
        authenticationRestrictions=[{"clientSource": ["10.0.0.0/8"]}],
    )
    fenced = secured.client(username="fenced", password="pw-fenced", authSource="shop")
    with raises_code("AuthenticationFailed"):
        fenced.shop.orders.find_one()
    admin.shop.command(
        "updateUser",
        "fenced",
        authenticationRestrictions=[
            {"clientSource": ["127.0.0.0/8"], "serverAddress": ["127.0.0.1"]}
        ],
    )
    admitted = secured.client(username="fenced", password="pw-fenced", authSource="shop")
    assert admitted.shop.orders.find_one() is not None
    # A role's restrictions bind its users too.
    admin.shop.command(
        "createRole",
        "fencedRole",
        privileges=[],
        roles=[],
        authenticationRestrictions=[{"serverAddress": ["192.0.2.1"]}],
    )
    admin.shop.command("grantRolesToUser", "fenced", roles=["fencedRole"])
    refused = secured.client(username="fenced", password="pw-fenced", authSource="shop")
    with raises_code("AuthenticationFailed"):
        refused.shop.orders.find_one()
    admin.shop.command("dropRole", "fencedRole")
    admin.shop.command("dropUser", "fenced")


def test_a_configuration_file_turns_access_control_on(start_server, tmp_path):
    config = tmp_path / "basalt.conf"
    config.write_text(
        "security:\n  authorization: enabled\n"
        "systemLog:\n  destination: file\n"
        "setParameter:\n  enableTestCommands: 1\n"
    )
    srv = start_server("--config", str(config))
    with raises_code("Unauthorized"):
        srv.client().test.c.find_one()
    srv.client().admin.command("createUser", "ops", pwd="ops-pw", roles=["root"])
    ops = authed(srv, "ops", "ops-pw")
    assert ops.admin.command("getParameter", 1, enableTestCommands=1)["enableTestCommands"] is True
    bad = tmp_path / "bad.conf"
    bad.write_text("net:\n  prot: 1\n")
    with pytest.raises(RuntimeError, match="Unrecognized option: net.prot"):
        start_server("-f", str(bad))


def test_logout_ends_the_connections_authentication(secured):
    client = authed(secured, *ROOT, maxPoolSize=1)
    assert client.admin.command("connectionStatus")["authInfo"]["authenticatedUsers"]
    client.admin.command("logout")
    assert client.admin.command("connectionStatus")["authInfo"]["authenticatedUsers"] == []


def scram_first(user: str) -> tuple[bytes, str]:
    nonce = base64.b64encode(os.urandom(18)).decode()
    return f"n,,n={user},r={nonce}".encode(), nonce


def test_hello_starts_authentication_and_names_mechanisms(secured):
    anonymous = secured.client()
    payload, nonce = scram_first("root")
    reply = anonymous.admin.command(
        "hello",
        saslSupportedMechs="admin.root",
        speculativeAuthenticate={
            "saslStart": 1,
            "mechanism": "SCRAM-SHA-256",
            "payload": payload,
            "db": "admin",
        },
    )
    assert reply["saslSupportedMechs"] == ["SCRAM-SHA-1", "SCRAM-SHA-256"]
    speculative = reply["speculativeAuthenticate"]
    assert speculative["done"] is False
    server_first = bytes(speculative["payload"]).decode()
    assert (
        server_first.startswith(f"r={nonce}")
        and ",s=" in server_first
        and ",i=15000" in server_first
    )
    assert "saslSupportedMechs" not in anonymous.admin.command(
        "hello", saslSupportedMechs="admin.ghost"
    )


def test_malformed_sasl_gets_errors_and_the_server_lives_on(secured):
    anonymous = secured.client()
    for payload in [
        b"",
        b"garbage",
        b"p=tls-server-end-point,,n=root,r=abc",
        b"n,,m=ext,n=root,r=x",
    ]:
        with pytest.raises(OperationFailure):
            anonymous.admin.command("saslStart", mechanism="SCRAM-SHA-256", payload=payload)
    with raises_code("MechanismUnavailable"):
        anonymous.admin.command("saslStart", mechanism="PLAIN", payload=b"\0root\0pw")
    with raises_code("ProtocolError"):
        anonymous.admin.command("saslContinue", conversationId=1, payload=b"c=biws,r=x,p=AAAA")
    assert anonymous.admin.command("ping")["ok"] == 1


def _msg(body: dict, request_id: int) -> bytes:
    payload = struct.pack("<I", 0) + b"\0" + bson.encode(body)
    return struct.pack("<iiii", 16 + len(payload), request_id, 0, 2013) + payload


async def _command(reader, writer, body: dict, request_id: int) -> dict:
    writer.write(_msg(body, request_id))
    await writer.drain()
    header = await reader.readexactly(16)
    (length,) = struct.unpack("<i", header[:4])
    payload = await reader.readexactly(length - 16)
    return bson.decode(payload[5:])


async def _authenticate_once(port: int, salted: dict) -> bool:
    """One connection: hello, SCRAM-SHA-256 as root, a ping; True when all succeeded."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        await _command(reader, writer, {"hello": 1, "$db": "admin"}, 1)
        first, nonce = scram_first("root")
        start = await _command(
            reader,
            writer,
            {"saslStart": 1, "mechanism": "SCRAM-SHA-256", "payload": first, "$db": "admin"},
            2,
        )
        server_first = bytes(start["payload"]).decode()
        fields = dict(part.split("=", 1) for part in server_first.split(","))
        key = (fields["s"], fields["i"])
        if key not in salted:
            salted[key] = hashlib.pbkdf2_hmac(
                "sha256", ROOT[1].encode(), base64.b64decode(fields["s"]), int(fields["i"])
            )
        without_proof = f"c=biws,r={fields['r']}"
        message = f"{first.decode()[3:]},{server_first},{without_proof}".encode()
        client_key = hmac.new(salted[key], b"Client Key", "sha256").digest()
        signature = hmac.new(hashlib.sha256(client_key).digest(), message, "sha256").digest()
        proof = base64.b64encode(
            bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        ).decode()
        final = f"{without_proof},p={proof}".encode()
        done = await _command(
            reader,
            writer,
            {
                "saslContinue": 1,
                "conversationId": start["conversationId"],
                "payload": final,
                "$db": "admin",
            },
            3,
        )
        if not done.get("ok") or not nonce:
            return False
        if not done["done"]:
            await _command(
                reader,
                writer,
                {"saslContinue": 1, "conversationId": 1, "payload": b"", "$db": "admin"},
                4,
            )
        ping = await _command(reader, writer, {"find": "orders", "limit": 1, "$db": "shop"}, 5)
        return ping.get("ok") == 1.0
    finally:
        writer.close()


def test_a_thousand_connections_authenticating_at_once_are_served(secured):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 4096:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(4096, hard), hard))

    async def storm() -> list[bool]:
        salted: dict = {}
        return await asyncio.wait_for(
            asyncio.gather(*[_authenticate_once(secured.port, salted) for _ in range(1000)]),
            timeout=120,
        )

    results = asyncio.run(storm())
    assert all(results), f"{results.count(False)} of 1000 failed"
    assert authed(secured, *ROOT).admin.command("ping")["ok"] == 1


def test_the_localhost_exception_creates_the_first_user_only(start_server):
    srv = start_server("--auth")
    anonymous = srv.client()
    with raises_code("Unauthorized"):
        anonymous.admin.command("listDatabases")
    with raises_code("Unauthorized"):
        anonymous.test.command("createUser", "elsewhere", pwd="x", roles=[])
    anonymous.admin.command("createUser", "first", pwd="first-pw", roles=["userAdminAnyDatabase"])
    with raises_code("Unauthorized"):
        anonymous.admin.command("createUser", "second", pwd="x", roles=["root"])
    first = authed(srv, "first", "first-pw")
    first.admin.command("createUser", "second", pwd="second-pw", roles=["root"])
    assert authed(srv, "second", "second-pw").test.c.insert_one({}).acknowledged


@pytest.fixture(scope="module")
def certificates(tmp_path_factory):
    ca = Certificates(tmp_path_factory.mktemp("certificates"))
    return {
        "ca": ca,
        "server": ca.issue("server", "/O=Basalt Tests/CN=127.0.0.1", server=True),
        "client": ca.issue("client", "/C=US/O=Acme/OU=apps/CN=ann"),
        "stranger": Certificates(tmp_path_factory.mktemp("other-ca"), "Other CA").issue(
            "stranger", "/CN=stranger"
        ),
    }


def plain(server, **kwargs) -> pymongo.MongoClient:
    """A client of `server` without the TLS options its tests give by default."""
    return pymongo.MongoClient(server.uri, serverSelectionTimeoutMS=1500, **kwargs)


def tls_args(certificates, mode: str = "requireTLS", *extra: str) -> list[str]:
    return [
        "--tlsMode",
        mode,
        "--tlsCertificateKeyFile",
        str(certificates["server"]),
        "--tlsCAFile",
        str(certificates["ca"].ca),
        *extra,
    ]


def tls_options(certificates) -> dict:
    """What a client needs for the servers of these tests: trust in the test CA, and the
    client certificate (which servers asking for one require)."""
    return {
        "tls": True,
        "tlsCAFile": str(certificates["ca"].ca),
        "tlsCertificateKeyFile": str(certificates["client"]),
    }


def tls_client(server, certificates, **kwargs) -> pymongo.MongoClient:
    kwargs.setdefault("serverSelectionTimeoutMS", 5000)
    return pymongo.MongoClient(
        server.uri, **{"tls": True, "tlsCAFile": str(certificates["ca"].ca), **kwargs}
    )


def test_require_tls_serves_tls_clients_and_closes_plain_ones(start_server, certificates):
    srv = start_server(
        *tls_args(certificates, "requireTLS", "--tlsAllowConnectionsWithoutCertificates"),
        client_options=tls_options(certificates),
    )
    assert tls_client(srv, certificates).admin.command("ping")["ok"] == 1
    with pytest.raises(ServerSelectionTimeoutError):
        plain(srv).admin.command("ping")
    assert "refused a connection without TLS" in srv.log_text()
    # A client that does not trust the server's CA gets no connection either.
    with pytest.raises(ServerSelectionTimeoutError):
        plain(srv, tls=True).admin.command("ping")
    assert srv.client().admin.command("rotateCertificates")["ok"] == 1


def test_prefer_tls_accepts_both(start_server, certificates):
    srv = start_server(
        *tls_args(certificates, "preferTLS", "--tlsAllowConnectionsWithoutCertificates"),
        client_options=tls_options(certificates),
    )
    assert tls_client(srv, certificates).admin.command("ping")["ok"] == 1
    assert plain(srv).admin.command("ping")["ok"] == 1


def test_client_certificates_are_required_and_verified(start_server, certificates):
    srv = start_server(*tls_args(certificates), client_options=tls_options(certificates))
    # No certificate: the handshake fails.
    with pytest.raises(ServerSelectionTimeoutError):
        tls_client(srv, certificates, serverSelectionTimeoutMS=1500).admin.command("ping")
    # One from a CA the server does not trust: refused too.
    with pytest.raises(ServerSelectionTimeoutError):
        tls_client(
            srv,
            certificates,
            tlsCertificateKeyFile=str(certificates["stranger"]),
            serverSelectionTimeoutMS=1500,
        ).admin.command("ping")
    ok = tls_client(srv, certificates, tlsCertificateKeyFile=str(certificates["client"]))
    assert ok.admin.command("ping")["ok"] == 1
    assert "TLS handshake failed" in srv.log_text()


def test_x509_authenticates_the_certificates_subject(start_server, certificates):
    srv = start_server(
        *tls_args(certificates, "requireTLS", "--auth"), client_options=tls_options(certificates)
    )
    setup = tls_client(srv, certificates, tlsCertificateKeyFile=str(certificates["client"]))
    setup.admin.command("createUser", ROOT[0], pwd=ROOT[1], roles=["root"])
    admin = tls_client(
        srv,
        certificates,
        tlsCertificateKeyFile=str(certificates["client"]),
        username=ROOT[0],
        password=ROOT[1],
    )
    subject = "CN=ann,OU=apps,O=Acme,C=US"
    admin["$external"].command("createUser", subject, roles=[{"role": "read", "db": "shop"}])
    admin.shop.orders.insert_one({"_id": 1})
    ann = tls_client(
        srv,
        certificates,
        tlsCertificateKeyFile=str(certificates["client"]),
        authMechanism="MONGODB-X509",
    )
    assert ann.shop.orders.find_one() == {"_id": 1}
    info = ann.admin.command("connectionStatus")["authInfo"]
    assert info["authenticatedUsers"] == [{"user": subject, "db": "$external"}]
    with raises_code("Unauthorized"):
        ann.shop.orders.insert_one({})
    wrong = tls_client(
        srv,
        certificates,
        tlsCertificateKeyFile=str(certificates["client"]),
        authMechanism="MONGODB-X509",
        username="CN=someone-else",
    )
    with raises_code("AuthenticationFailed"):
        wrong.shop.orders.find_one()


def refused_member(cluster, basalt_binary, client, extra_args):
    """Starts one more process with `extra_args`, which the set's reconfig cannot add:
    the members refuse to talk to it. Returns it, never a member."""
    cluster.extra_args = extra_args
    intruder = cluster.add_member(basalt_binary)
    config = client.admin.command("replSetGetConfig")["config"]
    config["members"].append(
        {
            "_id": len(config["members"]),
            "host": f"127.0.0.1:{intruder.port}",
            "votes": 0,
            "priority": 0,
        }
    )
    config["version"] += 1
    with pytest.raises(OperationFailure):
        client.admin.command("replSetReconfig", config, maxTimeMS=20000)
    hello = intruder.client(directConnection=True).admin.command("hello")
    assert not hello.get("secondary") and not hello.get("isWritablePrimary")
    return intruder


def test_a_replica_set_with_a_key_file_refuses_a_member_without_it(
    start_replica_set, basalt_binary, tmp_path
):
    key = tmp_path / "key"
    key.write_text(base64.b64encode(os.urandom(48)).decode() + "\n")
    key.chmod(0o600)
    cluster = start_replica_set(members=3, extra_args=["--keyFile", str(key)])
    primary = cluster.wait_for_primary()
    cluster.direct(primary).admin.command("createUser", ROOT[0], pwd=ROOT[1], roles=["root"])
    client = cluster.client(username=ROOT[0], password=ROOT[1])
    client.test.c.insert_one({"_id": 1})
    client.test.c.with_options(write_concern=pymongo.WriteConcern(w=3)).insert_one({"_id": 2})
    # The user reached every member through the log: each one authenticates it.
    for member in cluster.members:
        direct = cluster.direct(
            member, username=ROOT[0], password=ROOT[1], readPreference="secondaryPreferred"
        )
        assert direct.test.c.count_documents({}) == 2
    # Unauthenticated, a process cannot speak the members' protocol.
    with raises_code("Unauthorized"):
        cluster.direct(primary).admin.command("replSetRaft", "vote")
    # A fourth process with another key is added to the config but never joins.
    other_key = tmp_path / "other-key"
    other_key.write_text(base64.b64encode(os.urandom(48)).decode())
    other_key.chmod(0o600)
    intruder = refused_member(cluster, basalt_binary, client, ["--keyFile", str(other_key)])
    wait_until(
        lambda: "Authentication failed" in intruder.log_text(), what="the intruder's refusal logged"
    )


def test_members_talk_over_tls_with_their_certificates(start_replica_set, certificates, tmp_path):
    key = tmp_path / "key"
    key.write_text(base64.b64encode(os.urandom(48)).decode())
    key.chmod(0o600)
    cluster = start_replica_set(
        members=3,
        extra_args=[*tls_args(certificates), "--keyFile", str(key)],
        client_options=tls_options(certificates),
    )
    primary = cluster.wait_for_primary()
    cluster.direct(primary).admin.command("createUser", ROOT[0], pwd=ROOT[1], roles=["root"])
    client = cluster.client(username=ROOT[0], password=ROOT[1])
    client.test.c.with_options(write_concern=pymongo.WriteConcern(w=3)).insert_one({"_id": 1})

    # Every member is heard from through heartbeats, which go over TLS too.
    def states():
        status = client.admin.command("replSetGetStatus")
        return sorted(m["stateStr"] for m in status["members"])

    wait_until(
        lambda: states() == ["PRIMARY", "SECONDARY", "SECONDARY"], what="heartbeats over TLS"
    )
    # Plain TCP reaches no member: the members' own traffic went over TLS.
    for member in cluster.members:
        with pytest.raises(ServerSelectionTimeoutError):
            plain(member).admin.command("ping")


def test_x509_membership_admits_only_certificates_of_the_same_organization(
    start_replica_set, basalt_binary, certificates
):
    member_args = [*tls_args(certificates), "--clusterAuthMode", "x509"]
    cluster = start_replica_set(
        members=2, extra_args=member_args, client_options=tls_options(certificates)
    )
    primary = cluster.wait_for_primary()
    cluster.direct(primary).admin.command("createUser", ROOT[0], pwd=ROOT[1], roles=["root"])
    client = cluster.client(username=ROOT[0], password=ROOT[1])
    client.test.c.with_options(write_concern=pymongo.WriteConcern(w=2)).insert_one({"_id": 1})
    # A client certificate of another organization is no member's: the internal
    # protocol stays closed to it.
    ann = cluster.direct(primary)
    with raises_code("Unauthorized"):
        ann.admin.command("replSetRaft", "vote")
    # A process whose certificate (same CA) names another organization cannot join.
    outsider = certificates["ca"].issue("outsider", "/O=Elsewhere/CN=127.0.0.1", server=True)
    outsider_args = [*tls_args({**certificates, "server": outsider}), "--clusterAuthMode", "x509"]
    refused_member(cluster, basalt_binary, client, outsider_args)


def test_key_files_open_to_others_are_refused(start_server, tmp_path):
    key = tmp_path / "key"
    key.write_text("abcdefghijkl")
    key.chmod(0o644)
    with pytest.raises(RuntimeError, match="too open"):
        start_server("--keyFile", str(key))


def test_cluster_time_is_signed_and_a_forged_one_is_refused(start_replica_set, tmp_path):
    key = tmp_path / "key"
    key_text = base64.b64encode(os.urandom(48)).decode()
    key.write_text(key_text + "\n")
    key.chmod(0o600)
    cluster = start_replica_set(members=1, extra_args=["--keyFile", str(key)])
    primary = cluster.wait_for_primary()
    cluster.direct(primary).admin.command("createUser", ROOT[0], pwd=ROOT[1], roles=["root"])
    client = cluster.client(username=ROOT[0], password=ROOT[1])

    # No time is gossiped before it can be signed; the primary writes the first key to
    # admin.system.keys within a refresh or two, and signs with it two seconds later.
    cluster_time = wait_until(
        lambda: client.admin.command("ping").get("$clusterTime"),
        timeout_s=20,
        what="a signed $clusterTime",
    )
    assert cluster_time["signature"]["keyId"] != 0
    internal = cluster.direct(primary, username="__system", password=key_text, authSource="local")
    stored = internal.admin["system.keys"].find_one({"_id": cluster_time["signature"]["keyId"]})
    assert stored["purpose"] == "HMAC" and len(stored["key"]) == 20

    def proof(time: bson.Timestamp) -> bytes:
        value = struct.pack("<Q", (time.time << 32) | time.inc)
        return hmac.new(stored["key"], value, hashlib.sha1).digest()

    now = cluster_time["clusterTime"]
    assert cluster_time["signature"]["hash"] == proof(now)
    later = bson.Timestamp(now.time + 100, now.inc)
    key_id = cluster_time["signature"]["keyId"]

    def ping(time, hash_, key_id_) -> dict:
        signature = {"hash": bson.Binary(hash_), "keyId": bson.Int64(key_id_)}
        with RawConnection(primary.port) as raw:
            body = {"ping": 1, "$db": "admin"}
            body["$clusterTime"] = {"clusterTime": time, "signature": signature}
            return raw.command(body).doc

    # A time later than the member's own needs a proof by a key it knows.
    assert ping(later, proof(later), key_id)["ok"] == 1
    forged = ping(later, proof(now), key_id)
    assert (forged["ok"], forged["code"], forged["codeName"]) == (0, 183, "TimeProofMismatch")
    unknown = ping(later, bytes(20), 12345)
    assert (unknown["ok"], unknown["code"], unknown["codeName"]) == (0, 211, "KeyNotFound")
    # A time no later than its own needs none, as mongod.
    assert ping(now, bytes(20), 0)["ok"] == 1
    # A malformed one is BadValue, the connection lives on.
    with RawConnection(primary.port) as raw:
        for malformed in (1, {"clusterTime": 5}, {"clusterTime": later, "signature": 1}):
            reply = raw.command({"ping": 1, "$db": "admin", "$clusterTime": malformed}).doc
            assert (reply["ok"], reply["code"]) == (0, 2), malformed
        assert raw.command({"ping": 1, "$db": "admin"}).doc["ok"] == 1
