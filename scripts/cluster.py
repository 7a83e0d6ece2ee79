"""Starts a local replica set in one command (`make cluster`): N `basalt` members on
127.0.0.1 ports, each with its own --dbpath under --dir, initiated with all of them.
Prints the connection string and runs until Ctrl-C, then stops the members.

    scripts/cluster.py --members 3 --dir ./cluster
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "e2e"))

from basalt_server import ReplicaSet, default_binary  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=3)
    parser.add_argument("--name", default="rs0")
    parser.add_argument("--dir", type=Path, default=Path("cluster"))
    parser.add_argument("--binary", type=Path, default=default_binary())
    args = parser.parse_args()
    cluster = ReplicaSet(args.binary, args.dir, args.members, args.name)
    cluster.start()
    primary = cluster.wait_for_primary()
    print(f"replica set {args.name}: {cluster.uri}")
    print(f"primary: 127.0.0.1:{primary.port}; data and logs under {args.dir}/member*/")
    print("Ctrl-C stops the members.", flush=True)
    try:
        while all(m.is_alive() for m in cluster.members):
            time.sleep(1)
        print("a member exited; stopping the others", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        for member in cluster.members:
            member.stop()


if __name__ == "__main__":
    sys.exit(main())
