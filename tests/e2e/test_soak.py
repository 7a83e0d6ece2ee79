"""A short run of the soak script (`scripts/soak.py`): its checks hold for a few seconds
of normal and hostile traffic on every test run, and the script itself keeps working.
The 10-minute run with 20 clients is `make soak`."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import soak  # noqa: E402

SHORT_RUN_S = 20


def test_a_short_soak_passes(basalt_binary, tmp_path):
    summary = soak.soak(basalt_binary, SHORT_RUN_S, clients=6, hostile_clients=3, workdir=tmp_path)
    assert summary["failures"] == [], summary
    assert summary["passed"]
    assert summary["acknowledged_inserts"] > 0
    assert summary["normal_p99_ms"] is not None
    refused = [
        name for name in summary["hostile"] if not name.endswith((": ok", ": held", ": answered"))
    ]
    assert refused, summary["hostile"]
