"""The HTTP interface (`--httpPort`): the status page in a real browser (headless
Chromium), its JSON, and `/metrics` read by Prometheus' own parser.

Chromium comes from the OS packages (`make browser` installs it where it can); the
browser test is skipped with a message where it is not installed.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import threading
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from basalt_server import free_port
from helpers import wait_until

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def get(port: int, path: str, login: tuple[str, str] | None = None) -> tuple[int, str, str]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
    if login is not None:
        token = base64.b64encode(":".join(login).encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers["Content-Type"], response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["Content-Type"], error.read().decode()


def metrics(port: int) -> dict[str, dict]:
    """Every sample of /metrics by name, as {labels (sorted tuple): value}."""
    status, kind, text = get(port, "/metrics")
    assert status == 200 and kind.startswith("text/plain")
    samples: dict[str, dict] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return samples


@pytest.fixture
def http_server(start_server):
    port = free_port()
    srv = start_server("--httpPort", str(port))
    return srv, port


def test_metrics_in_prometheus_format(http_server):
    srv, port = http_server
    client = srv.client()
    client.shop.items.insert_many([{"_id": i} for i in range(10)])
    for _ in range(5):
        client.shop.items.find_one({"_id": 3})
    before = metrics(port)
    client.shop.items.insert_one({"_id": "one more"})
    after = metrics(port)

    inserts = (("type", "insert"),)
    assert (
        after["basalt_opcounters_total"][inserts] == before["basalt_opcounters_total"][inserts] + 1
    )
    finds = (("command", "find"),)
    assert after["basalt_command_duration_seconds_count"][finds] == 5
    assert after["basalt_command_duration_seconds_sum"][finds] > 0
    buckets = sorted(
        (float(dict(labels)["le"]), value)
        for labels, value in after["basalt_command_duration_seconds_bucket"].items()
        if dict(labels)["command"] == "find"
    )
    counts = [value for _, value in buckets]
    assert counts == sorted(counts) and counts[-1] == 5 and buckets[-1][0] == float("inf")
    assert after["basalt_connections"][(("state", "current"),)] >= 1
    assert after["basalt_network_bytes_total"][(("direction", "in"),)] > 0
    assert after["basalt_memory_bytes"][(("kind", "resident"),)] > 1 << 20
    assert after["basalt_storage_bytes"][()] > 0
    assert after["basalt_collections"][()] >= 1
    assert "basalt_replication_lag_seconds" not in after


def test_status_json_and_errors(http_server):
    srv, port = http_server
    client = srv.client()
    client.shop.items.insert_many([{"_id": i} for i in range(20)])
    client.shop.items.create_index("x")
    client.shop.command("profile", 0, slowms=0)
    client.shop.items.find_one({"_id": 7})
    status, kind, text = get(port, "/status.json")
    assert status == 200 and kind == "application/json"
    page = json.loads(text)
    shop = next(db for db in page["databases"] if db["name"] == "shop")
    items = next(c for c in shop["collections"] if c["name"] == "items")
    assert items["count"] == 20 and items["indexes"] == ["_id_", "x_1"]
    assert any(op["ns"] == "shop.items" for op in page["slowOperations"])
    assert page["replication"] is None
    assert get(port, "/nowhere")[0] == 404
    request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 405


def test_under_access_control_the_http_interface_asks_for_a_monitors_password(start_server):
    """With --auth, every path needs HTTP Basic credentials of a user whose roles grant
    serverStatus (clusterMonitor): 401 and a Basic challenge without them or with a wrong
    password, 403 for a user without the privilege."""
    port = free_port()
    srv = start_server("--auth", "--httpPort", str(port))
    srv.client().admin.command("createUser", "root", pwd="pw-root", roles=["root"])
    admin = srv.client(username="root", password="pw-root")
    admin.admin.command("createUser", "monitor", pwd="pw-monitor", roles=["clusterMonitor"])
    admin.admin.command("createUser", "reader", pwd="pw-reader", roles=["readAnyDatabase"])
    admin.ops.command(
        "createUser", "watch", pwd="pw-watch", roles=[{"role": "clusterMonitor", "db": "admin"}]
    )
    for path in ["/", "/status.js", "/status.json", "/metrics"]:
        status, _, _ = get(port, path)
        assert status == 401, path
        assert get(port, path, ("monitor", "wrong"))[0] == 401
        assert get(port, path, ("nobody", "pw-monitor"))[0] == 401
        assert get(port, path, ("reader", "pw-reader"))[0] == 403
        assert get(port, path, ("monitor", "pw-monitor"))[0] == 200, path
    assert get(port, "/metrics", ("watch@ops", "pw-watch"))[0] == 200
    assert get(port, "/metrics", ("watch", "pw-watch"))[0] == 401  # not a user of admin
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10)
    except urllib.error.HTTPError as error:
        assert error.headers["WWW-Authenticate"].startswith('Basic realm="basalt"')
    status, kind, body = get(port, "/status.json", ("root", "pw-root"))
    assert status == 200 and json.loads(body)["uptimeSeconds"] >= 0


def test_replica_set_member_reports_lag(start_replica_set):
    port = free_port()
    cluster = start_replica_set(members=1, extra_args=["--httpPort", str(port)])
    cluster.client().shop.items.insert_one({"_id": 1})
    samples = wait_until(
        lambda: metrics(port).get("basalt_replication_lag_seconds"), what="a lag sample"
    )
    assert list(samples.values()) == [0.0]
    status = json.loads(get(port, "/status.json")[2])
    assert status["replication"]["set"] == "rs0"
    assert status["replication"]["members"][0]["stateStr"] == "PRIMARY"


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.skip("chromium not installed: `make browser` installs Debian's package")
    return found


def test_status_page_renders_and_its_charts_update_in_chromium(http_server, tmp_path):
    browser = chromium()
    srv, port = http_server
    client = srv.client()
    client.shop.items.insert_many([{"_id": i, "n": i} for i in range(100)])
    stop = threading.Event()

    def traffic():
        while not stop.is_set():
            client.shop.items.find_one({"n": 42})
            client.shop.log.insert_one({"at": 1})

    worker = threading.Thread(target=traffic, daemon=True)
    worker.start()
    profile = ["--user-data-dir=" + str(tmp_path / "chromium")]
    url = f"http://127.0.0.1:{port}/"
    try:
        # Chromium runs the page's script for 5 s of (virtual) time: five polls.
        dom = subprocess.run(
            [browser, *CHROMIUM_FLAGS, *profile, "--virtual-time-budget=5000", "--dump-dom", url],
            capture_output=True, text=True, timeout=120, check=True,
        ).stdout  # fmt: skip
        screenshot = tmp_path / "status-page.png"
        subprocess.run(
            [
                browser, *CHROMIUM_FLAGS, *profile, "--virtual-time-budget=5000",
                "--window-size=1280,1400", f"--screenshot={screenshot}", url,
            ],
            capture_output=True, timeout=120, check=True,
        )  # fmt: skip
    finally:
        stop.set()
        worker.join(10)
    samples = int(re.search(r'data-samples="(\d+)"', dom).group(1))
    assert samples >= 3, "the page polled /status.json fewer than 3 times"
    # The charts drew lines for the operations the traffic made, from several samples.
    ops_chart = re.search(r'<svg id="ops-chart".*?</svg>', dom, re.S).group(0)
    found = re.findall(r'<polyline points="([^"]+)"[^>]*data-series="(\w+)"', ops_chart)
    lines = {name: points for points, name in found}
    assert {"insert", "query"} <= set(lines), ops_chart
    assert len(lines["insert"].split()) >= 2
    assert 'data-series="find"' in dom and 'data-series="insert"' in dom  # latency chart
    assert "shop.items" in dom and "_id_" in dom
    assert "cannot reach" not in dom
    assert screenshot.stat().st_size > 10_000
    print(f"screenshot: {screenshot}")
