#!/usr/bin/env python3
"""Scores basalt on MongoDB's driver-specification tests and guards the score.

Runs the shared conformance runner (../shared/conformance/unified_runner.py, next to the
repository) once per suite, each time against basalt started on free ports with temporary
--dbpath and test commands enabled (the specs' fail points need configureFailPoint):

- standalone: the CRUD, index-management, collection-management, run-command and
  retryable-reads folders against one server;
- replicaset: the retryable-writes folder and the standalone's folders against a
  one-member replica set (`--topology replicaset`), every write through the log;
- auth: the standalone's folders and the auth folder against a server with `--auth`,
  every client authenticated (SCRAM-SHA-256) as a root user made through the localhost
  exception (`--auth` to the runner), so access control is checked on every command the
  specs send;
- transactions and transactions-3: the transactions, convenient-API, sessions,
  read-write-concern, versioned-API and change-streams folders against a one-member and
  a three-member replica set (tests the runner itself cannot run are left out, see RUNNER_LIMITS).

Each run's passed count is compared with its line in tests/conformance-baseline.txt. A
drop fails (something that worked broke); a rise passes and says to raise the baseline,
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
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "e2e"))

from basalt_server import BasaltServer, ReplicaSet, default_binary  # noqa: E402

TEST_COMMANDS = ["--setParameter", "enableTestCommands=1"]


@dataclass
class Suite:
    name: str
    topology: str
    folders: list[str]
    auth: bool = False
    members: int = 1
    # Tests left out, as regexes of 'file :: description' (see RUNNER_LIMITS).
    exclude: list[str] = field(default_factory=list)


# Tests the runner itself cannot run, against mongod either: those that end a session
# and then match its lsid (the runner asks pymongo for the ended session's id, which
# raises and stops the whole run), and one whose callback's expected error the runner
# swallows, so that withTransaction commits a transaction the server aborted (a
# DuplicateKey aborts it, as in MongoDB) and retries it for 120 s (DRIVERS-2584).
RUNNER_LIMITS = [
    r"abort\.json :: implicit abort$",
    r"driver-sessions-dirty-session-errors\.json :: Dirty explicit session is discarded",
    r"driver-sessions-server-support\.json :: Server supports explicit sessions$",
    r"callback-retry\.json :: callback is not retried after non-transient error",
]
TRANSACTION_FOLDERS = [
    "specs/transactions/tests/unified",
    "specs/transactions-convenient-api/tests/unified",
    "specs/sessions/tests",
    "specs/read-write-concern/tests/operation",
    "specs/versioned-api/tests",
    "specs/change-streams/tests/unified",
]


STANDALONE_FOLDERS = [
    "specs/crud/tests/unified",
    "specs/index-management/tests",
    "specs/collection-management/tests",
    "specs/run-command/tests/unified",
    "specs/retryable-reads/tests/unified",
]
# The user the auth suite's clients authenticate as.
CONFORMANCE_USER = ("conformance", "conformance-pw")


SUITES = [
    Suite("standalone", "single", STANDALONE_FOLDERS),
    Suite(
        "replicaset",
        "replicaset",
        [
            "specs/retryable-writes/tests/unified",
            "specs/crud/tests/unified",
            "specs/index-management/tests",
            "specs/collection-management/tests",
            "specs/run-command/tests/unified",
            "specs/retryable-reads/tests/unified",
        ],
    ),
    Suite("auth", "single", [*STANDALONE_FOLDERS, "specs/auth/tests/unified"], auth=True),
    Suite("transactions", "replicaset", TRANSACTION_FOLDERS, exclude=RUNNER_LIMITS),
    Suite(
        "transactions-3",
        "replicaset",
        TRANSACTION_FOLDERS,
        members=3,
        exclude=RUNNER_LIMITS,
    ),
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


def read_baselines() -> dict[str, int]:
    """The baseline file's `suite passed` lines."""
    baselines = {}
    for line in BASELINE.read_text().splitlines():
        name, _, count = line.partition(" ")
        if name and count.strip().isdigit():
            baselines[name] = int(count)
    return baselines


def run_suite(suite: Suite, conformance: Path, results: Path, filter_: str | None, tmp: Path):
    """Runs one suite against a fresh server (or set); returns (summary, problems)."""
    if suite.topology == "single":
        extra_args = [*TEST_COMMANDS, *(["--auth"] if suite.auth else [])]
        target = BasaltServer(
            default_binary(), tmp / "data", tmp / "basalt.log", extra_args=extra_args
        ).start()
        uri = target.uri
        members = [target]
        if suite.auth:
            user, password = CONFORMANCE_USER
            target.client().admin.command("createUser", user, pwd=password, roles=["root"])
            uri = f"mongodb://{user}:{password}@127.0.0.1:{target.port}/?authSource=admin"
    else:
        target = ReplicaSet(
            default_binary(), tmp / "set", suite.members, extra_args=TEST_COMMANDS
        ).start()
        uri = target.uri
        members = target.members
    command = [sys.executable, str(conformance / "unified_runner.py"), "--uri", uri]
    # The runner decides which tests apply (runOnRequirements) by the version the
    # server reports (buildInfo), as a driver's test suite does.
    command += ["--topology", suite.topology, "--server-version", "auto"]
    if suite.auth:
        command += ["--auth"]
    command += [str(conformance / folder) for folder in suite.folders]
    command += ["--results", str(results)]
    selection = "".join(f"(?!.*{pattern})" for pattern in suite.exclude)
    if filter_:
        selection += f"(?=.*{filter_})"
    if selection:
        command += ["--filter", f"^{selection}"]
    try:
        status, summary = run_runner(command)
        survived = all(m.is_alive() for m in members)
        panics = [line for m in members for line in m.panics()]
        log_tail = "\n".join(m.log_tail() for m in members)
    finally:
        for member in members:
            member.stop()
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
    return summary, problems


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--update-baseline", action="store_true", help="write the passed counts to the baseline"
    )
    parser.add_argument(
        "--results", help="where the runner writes its JSON results (default: temp files)"
    )
    parser.add_argument(
        "--shared", help="the shared/ directory (default: $BASALT_SHARED_DIR or ../shared)"
    )
    parser.add_argument(
        "--filter", help="only tests whose 'file :: description' matches this regex"
    )
    parser.add_argument("--suite", choices=[s.name for s in SUITES], help="run one suite only")
    args = parser.parse_args()

    conformance = conformance_dir(args.shared)
    if not (conformance / "unified_runner.py").is_file():
        print(f"conformance: runner not found in {conformance}; is shared/ beside the repository?")
        return 1
    baselines = read_baselines()
    passed_counts = dict(baselines)
    failed = False
    for suite in SUITES:
        if args.suite and suite.name != args.suite:
            continue
        stem = args.results or str(Path(tempfile.gettempdir()) / "basalt-conformance.json")
        results = Path(stem).with_name(f"{Path(stem).stem}-{suite.name}.json")
        print(f"conformance: {suite.name} ({', '.join(suite.folders)})", flush=True)
        with tempfile.TemporaryDirectory(prefix="basalt-conformance-") as tmp:
            summary, problems = run_suite(suite, conformance, results, args.filter, Path(tmp))
        if problems:
            print(f"conformance: {suite.name} FAILED: " + "; ".join(problems))
            failed = True
            continue
        passed, failures, skipped = summary
        baseline = baselines.get(suite.name, 0)
        passed_counts[suite.name] = passed
        print(
            f"conformance: {suite.name}: {passed} passed (baseline {baseline}), {failures} failed, "
            f"{skipped} skipped; results in {results}"
        )
        if args.update_baseline or args.filter:
            continue
        if passed < baseline:
            print(f"conformance: {suite.name} FAILED: passed dropped from {baseline} to {passed}")
            failed = True
        elif passed > baseline:
            print(
                f"conformance: {suite.name} improved by {passed - baseline}; raise the baseline "
                "with `make conformance-baseline`"
            )
    if args.update_baseline and not failed:
        BASELINE.write_text("".join(f"{name} {n}\n" for name, n in passed_counts.items()))
        print(f"conformance: baselines written to {BASELINE.relative_to(REPO)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
