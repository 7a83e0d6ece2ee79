"""Runs a real `basalt` process for end-to-end tests and scripts.

End-to-end tests must talk to the server the way users do: a separate process on a
TCP port, with its own data directory, that can be stopped, restarted and killed
with SIGKILL. This module owns that life cycle so the pytest fixtures
(conftest.py) and scripts/conformance.py start the server the same way.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pymongo
from fault_proxy import FaultProxy
from pymongo.errors import PyMongoError

STARTUP_TIMEOUT_S = 60.0
SHUTDOWN_TIMEOUT_S = 20.0
PANIC_MARKER = "panicked at"


def default_binary() -> Path:
    """The binary `make build` produces: $BASALT_BIN, else the debug build."""
    if os.environ.get("BASALT_BIN"):
        return Path(os.environ["BASALT_BIN"])
    target = os.environ.get("CARGO_TARGET_DIR") or os.path.expanduser("~/.cache/basalt-target")
    return Path(target) / "debug" / "basalt"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class BasaltServer:
    """One `basalt` process bound to 127.0.0.1:port with data under `dbpath`.

    The port and dbpath stay the same across restarts, so a restarted server
    serves the same data at the same URI. Every start appends to one log file
    (stderr and stdout of all runs), which `log_text` returns.
    """

    def __init__(
        self,
        binary: Path,
        dbpath: Path,
        log_path: Path,
        port: int | None = None,
        extra_args: list[str] | None = None,
        launcher: list[str] | None = None,
        quiet: bool = True,
        client_options: dict | None = None,
    ):
        self.binary = Path(binary)
        self.extra_args = list(extra_args or [])
        # A command that runs the binary, such as `nsenter ...` into a mount namespace.
        self.launcher = list(launcher or [])
        # --quiet keeps the log to warnings; without it, connections are logged too.
        self.quiet = quiet
        # What every client of this server needs (TLS options under requireTLS, say).
        self.client_options = dict(client_options or {})
        self.dbpath = Path(dbpath)
        self.log_path = Path(log_path)
        self.port = port or free_port()
        self.proc: subprocess.Popen | None = None
        self._clients: list[pymongo.MongoClient] = []

    @property
    def uri(self) -> str:
        return f"mongodb://127.0.0.1:{self.port}/"

    @property
    def argv(self) -> list[str]:
        return [
            *self.launcher,
            str(self.binary),
            "--port",
            str(self.port),
            "--bind_ip",
            "127.0.0.1",
            "--dbpath",
            str(self.dbpath),
            *(["--quiet"] if self.quiet else []),
            *self.extra_args,
        ]

    def start(self, timeout_s: float = STARTUP_TIMEOUT_S) -> BasaltServer:
        if not self.binary.is_file():
            raise FileNotFoundError(
                f"basalt binary not found at {self.binary}; run `make build` or set BASALT_BIN"
            )
        self.dbpath.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            log.write(f"\n==== {' '.join(self.argv)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                self.argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log
            )
        self._wait_until_ready(timeout_s)
        return self

    def _wait_until_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"basalt exited with status {self.proc.returncode} during startup; "
                    f"log:\n{self.log_tail()}"
                )
            try:
                # Polled monitoring: a streaming monitor's awaitable hello would keep a
                # connection (and a thread) busy in the server for 10 s after the probe.
                with pymongo.MongoClient(
                    self.uri,
                    serverSelectionTimeoutMS=500,
                    connectTimeoutMS=500,
                    serverMonitoringMode="poll",
                    # A replica set member answers whatever its state.
                    directConnection=True,
                    **self.client_options,
                ) as probe:
                    probe.admin.command("ping")
                return
            except PyMongoError as exc:
                last_error = exc
                time.sleep(0.1)
        self.kill()
        raise TimeoutError(
            f"basalt did not answer ping within {timeout_s}s ({last_error}); log:\n{self.log_tail()}"
        )

    def client(self, **kwargs) -> pymongo.MongoClient:
        """A MongoClient for this server, closed when the server stops."""
        kwargs.setdefault("serverSelectionTimeoutMS", 10_000)
        client = pymongo.MongoClient(self.uri, **{**self.client_options, **kwargs})
        self._clients.append(client)
        return client

    def is_alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout_s: float = SHUTDOWN_TIMEOUT_S) -> int | None:
        """Graceful shutdown (SIGTERM, as an init system would send). Returns the exit status."""
        self._close_clients()
        if not self.is_alive():
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise TimeoutError(f"basalt ignored SIGTERM for {timeout_s}s; killed it") from None

    def kill(self) -> None:
        """SIGKILL, like `kill -9`: no chance to flush or clean up.

        Clients from `client()` are closed first, while the server can still answer
        their endSessions; closing them afterwards would wait for server selection.
        """
        self._close_clients()
        if self.is_alive():
            self.proc.kill()
            self.proc.wait()

    def restart(self, hard: bool = False) -> BasaltServer:
        if hard:
            self.kill()
        else:
            self.stop()
        return self.start()

    def _close_clients(self) -> None:
        for client in self._clients:
            client.close()
        self._clients.clear()

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def panics(self) -> list[str]:
        """Rust panics the log reports, each with its message (the line after): a bug
        even if the server survived it."""
        lines = self.log_text().splitlines()
        return [
            f"{line} {lines[i + 1].strip() if i + 1 < len(lines) else ''}"
            for i, line in enumerate(lines)
            if PANIC_MARKER in line
        ]


PRIMARY_TIMEOUT_S = 30.0


class ReplicaSet:
    """A replica set of `basalt` processes on 127.0.0.1, each with its own dbpath under
    `directory`, started with `--replSet name` and initiated with every member.

    Used by the replica set tests, `scripts/cluster.py` (`make cluster`) and the failover
    trials, so all of them start a set the same way. With `partitionable`, the members
    reach each other through a `FaultProxy` (`self.proxy`) that can cut them apart.
    """

    def __init__(
        self,
        binary: Path,
        directory: Path,
        members: int = 3,
        name: str = "rs0",
        extra_args: list[str] | None = None,
        client_options: dict | None = None,
        partitionable: bool = False,
    ):
        self.name = name
        self.directory = Path(directory)
        self.extra_args = list(extra_args or [])
        # What every client of the members needs (TLS options, say).
        self.client_options = dict(client_options or {})
        self.members = [self._member(binary, i) for i in range(members)]
        self._clients: list[pymongo.MongoClient] = []
        self.proxy: FaultProxy | None = None
        if partitionable:
            self.proxy = FaultProxy([m.port for m in self.members])
            for i, member in enumerate(self.members):
                member.extra_args += self.proxy.args(i)

    def _member(self, binary: Path, i: int) -> BasaltServer:
        return BasaltServer(
            binary,
            self.directory / f"member{i}" / "data",
            self.directory / f"member{i}" / "basalt.log",
            extra_args=["--replSet", self.name, *self.extra_args],
            client_options=self.client_options,
        )

    def add_member(self, binary: Path) -> BasaltServer:
        """Starts one more member (not yet in the config: `rs.add` it)."""
        member = self._member(binary, len(self.members))
        self.members.append(member)
        return member.start()

    @property
    def hosts(self) -> list[str]:
        return [f"127.0.0.1:{m.port}" for m in self.members]

    @property
    def uri(self) -> str:
        return f"mongodb://{','.join(self.hosts)}/?replicaSet={self.name}"

    def config(self) -> dict:
        return {
            "_id": self.name,
            "members": [{"_id": i, "host": host} for i, host in enumerate(self.hosts)],
        }

    def start(self) -> ReplicaSet:
        for member in self.members:
            member.start()
        with self.members[0].client(directConnection=True) as first:
            first.admin.command("replSetInitiate", self.config())
        self.wait_for_primary()
        return self

    def client(self, **kwargs) -> pymongo.MongoClient:
        kwargs.setdefault("serverSelectionTimeoutMS", 20_000)
        client = pymongo.MongoClient(self.uri, **{**self.client_options, **kwargs})
        self._clients.append(client)
        return client

    def direct(self, member: BasaltServer, **kwargs) -> pymongo.MongoClient:
        """A client of one member alone (directConnection)."""
        return member.client(directConnection=True, **kwargs)

    def primary(self) -> BasaltServer | None:
        """The member that says it is a writable primary, if any."""
        for member in self.members:
            if not member.is_alive():
                continue
            try:
                with pymongo.MongoClient(
                    member.uri,
                    directConnection=True,
                    serverSelectionTimeoutMS=1_000,
                    serverMonitoringMode="poll",
                    **self.client_options,
                ) as probe:
                    if probe.admin.command("hello").get("isWritablePrimary"):
                        return member
            except PyMongoError:
                continue
        return None

    def wait_for_primary(self, timeout_s: float = PRIMARY_TIMEOUT_S) -> BasaltServer:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            primary = self.primary()
            if primary is not None:
                return primary
            time.sleep(0.05)
        raise TimeoutError(f"no primary within {timeout_s}s")

    def secondaries(self) -> list[BasaltServer]:
        primary = self.primary()
        return [m for m in self.members if m is not primary and m.is_alive()]

    def kill(self) -> None:
        for client in self._clients:
            client.close()
        self._clients.clear()
        for member in self.members:
            member.kill()
        if self.proxy is not None:
            self.proxy.close()

    def panics(self) -> list[str]:
        return [line for member in self.members for line in member.panics()]
