"""A fault-injecting TCP proxy between replica set members, on 127.0.0.1 only.

Each member reaches each other member through a link of its own (`--setParameter
peerRoutes=HOST>VIA,...`, a test parameter), so the links of two members can be cut
apart while clients still reach every member directly: the partitions of a Jepsen test.
A cut link closes its open connections and holds new ones without forwarding a byte
(the member's connect succeeds, its requests time out, as behind a black hole) until it
is healed.

The proxy runs in a process of its own, so that the client threads of a test never
delay the members' heartbeats. `FaultProxy` starts and commands it; run as a script,
it reads `cut I J`, `isolate I` and `heal` lines on stdin and answers `ok`.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

# The bytes a pump moves at once.
CHUNK = 1 << 16


class Link:
    """Member `source`'s route to member `target`: a listener forwarding to its port."""

    def __init__(self, source: int, target: int, target_port: int):
        self.source = source
        self.target = target
        self.target_port = target_port
        self.cut = False
        self.healed = asyncio.Event()
        self.writers: set[asyncio.StreamWriter] = set()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.cut:
            # Held: nothing forwarded, closed once healed.
            await self.healed.wait()
            writer.close()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.close()
            return
        pair = {writer, up_writer}
        self.writers |= pair
        await asyncio.gather(self.pump(reader, up_writer), self.pump(up_reader, writer))
        self.writers -= pair
        for w in pair:
            w.close()

    async def pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while not self.cut:
                data = await reader.read(CHUNK)
                if not data or self.cut:
                    break
                writer.write(data)
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    def set_cut(self, cut: bool) -> None:
        self.cut = cut
        if cut:
            self.healed.clear()
            for writer in list(self.writers):
                writer.close()
        else:
            self.healed.set()


async def run(routes: list[dict]) -> None:
    links: list[Link] = []
    ports = []
    for route in routes:
        link = Link(route["source"], route["target"], route["target_port"])
        server = await asyncio.start_server(link.serve, "127.0.0.1", 0)
        links.append(link)
        ports.append(server.sockets[0].getsockname()[1])
    print(json.dumps(ports), flush=True)
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:
            return
        words = line.split()
        if words[:1] == ["cut"]:
            a, b = int(words[1]), int(words[2])
            for link in links:
                if {link.source, link.target} == {a, b}:
                    link.set_cut(True)
        elif words[:1] == ["isolate"]:
            member = int(words[1])
            for link in links:
                if member in (link.source, link.target):
                    link.set_cut(True)
        elif words[:1] == ["heal"]:
            for link in links:
                link.set_cut(False)
        print("ok", flush=True)


class FaultProxy:
    """Links between every two of `ports` (members 0..n-1), in a process of its own."""

    def __init__(self, ports: list[int]):
        routes = [
            {"source": i, "target": j, "target_port": port}
            for i in range(len(ports))
            for j, port in enumerate(ports)
            if i != j
        ]
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), json.dumps(routes)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        listening = json.loads(self.proc.stdout.readline())
        # Member i's `peerRoutes` parameter: each other member through its link.
        self.routes: dict[int, list[str]] = {i: [] for i in range(len(ports))}
        for route, via in zip(routes, listening, strict=True):
            self.routes[route["source"]].append(f"127.0.0.1:{route['target_port']}>127.0.0.1:{via}")

    def args(self, member: int) -> list[str]:
        """The member's command-line arguments that route it through the proxy."""
        return [
            "--setParameter",
            "enableTestCommands=1",
            "--setParameter",
            "peerRoutes=" + ",".join(self.routes[member]),
        ]

    def _command(self, line: str) -> None:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        if self.proc.stdout.readline().strip() != "ok":
            raise RuntimeError(f"fault proxy did not take {line!r}")

    def cut(self, a: int, b: int) -> None:
        """Members a and b no longer hear each other."""
        self._command(f"cut {a} {b}")

    def isolate(self, member: int) -> None:
        """The member hears no other member, and none hears it."""
        self._command(f"isolate {member}")

    def heal(self) -> None:
        self._command("heal")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


if __name__ == "__main__":
    asyncio.run(run(json.loads(sys.argv[1])))
