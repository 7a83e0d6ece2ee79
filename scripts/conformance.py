#!/usr/bin/env python3
"""Scores basalt on MongoDB's driver-specification tests and guards the score.

Starts basalt on a free port with a temporary --dbpath, runs the shared conformance
runner (../shared/conformance/unified_runner.py, next to the repository) over the
CRUD, index-management, collection-management and run-command spec folders, and
compares the number of passed tests with tests/conformance-baseline.txt. A drop
fails (something that worked broke); a rise passes and says to raise the baseline,
which `--update-baseline` (make conformance-baseline) does.

The spec files are read from ../shared at run time and never copied into this
repository: their license does not allow it.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "e2e"))

from basalt_server import BasaltServer, default_binary  # noqa: E402

SPEC_FOLDERS = [
    "specs/crud/tests/unified",
    "specs/index-management/tests",
    "specs/collection-management/tests",
    "specs/run-command/tests/unified",
]
BASELINE = REPO / "tests" / "conformance-baseline.txt"
SUMMARY = re.compile(r"^(\d+) passed, (\d+) failed, (\d+) skipped$")
RUN_LIMIT_S = 30 * 60  # far above a normal run; stops a hung server from eating CI's time


def conformance_dir(explicit: str | None) -> Path:
    shared = Path(explicit or os.environ.get("BASALT_SHARED_DIR") or REPO.parent / "shared")
    return shared / "conformance"


def run_runner(command: list[str]) -> tuple[int, tuple[int, int, int] | None]:
    """Runs the conformance runner, echoing its output; returns its status and summary."""
    summary = None
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    watchdog = threading.Timer(RUN_LIMIT_S, proc.kill)
    watchdog.start()
    try:
        for line in proc.stdout:
            print(line, end="", flush=True)
            match = SUMMARY.match(line.strip())
            if match:
                summary = tuple(int(n) for n in match.groups())
        status = proc.wait()
    finally:
        watchdog.cancel()
    return status, summary


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--update-baseline", action="store_true", help="write the passed count to the baseline"
    )
    parser.add_argument(
        "--results", help="where the runner writes its JSON results (default: a temp file)"
    )
    parser.add_argument(
        "--shared", help="the shared/ directory (default: $BASALT_SHARED_DIR or ../shared)"
    )
    parser.add_argument(
        "--filter", help="only tests whose 'file :: description' matches this regex"
    )
    args = parser.parse_args()

    conformance = conformance_dir(args.shared)
    runner = conformance / "unified_runner.py"
    if not runner.is_file():
        print(f"conformance: runner not found at {runner}; is shared/ beside the repository?")
        return 1
    results = Path(args.results or Path(tempfile.gettempdir()) / "basalt-conformance.json")

    with tempfile.TemporaryDirectory(prefix="basalt-conformance-") as tmp:
        server = BasaltServer(
            default_binary(), Path(tmp) / "data", Path(tmp) / "basalt.log"
        ).start()
        command = [sys.executable, str(runner), "--uri", server.uri]
        command += [str(conformance / folder) for folder in SPEC_FOLDERS]
        command += ["--results", str(results)]
        if args.filter:
            command += ["--filter", args.filter]
        try:
            status, summary = run_runner(command)
            survived = server.is_alive()
            panics = server.panics()
            log_tail = server.log_tail()
        finally:
            server.stop()

    problems = []
    if status not in (0, 1):  # 1 only means "some tests failed"
        problems.append(f"the runner exited with status {status}")
    if summary is None:
        problems.append("the runner printed no 'N passed, N failed, N skipped' line")
    if not survived:
        problems.append(f"basalt died during the run; log tail:\n{log_tail}")
    if panics:
        print(f"conformance: warning: basalt logged {len(panics)} panics, e.g.:")
        print("\n".join(f"  {line}" for line in panics[:5]))
    if problems:
        print("conformance: FAILED: " + "; ".join(problems))
        return 1

    passed, failed, skipped = summary
    baseline = int(BASELINE.read_text().strip())
    print(
        f"conformance: {passed} passed (baseline {baseline}), {failed} failed, {skipped} skipped; results in {results}"
    )
    if args.update_baseline:
        BASELINE.write_text(f"{passed}\n")
        print(f"conformance: baseline set to {passed} in {BASELINE.relative_to(REPO)}")
        return 0
    if passed < baseline:
        print(f"conformance: FAILED: passed count dropped from {baseline} to {passed}")
        return 1
    if passed > baseline:
        print(
            f"conformance: improved by {passed - baseline}; raise the baseline with `make conformance-baseline`"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
