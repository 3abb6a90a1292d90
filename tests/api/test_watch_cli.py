"""`meshplan watch` creates a watch with its switch threshold through the running service; a threshold outside
0-100% is a one-line error naming the option (exit 2) and stores nothing."""

from __future__ import annotations

import subprocess
import sys

from fastapi.testclient import TestClient

from tests.api.helpers import make_cluster, make_model, name, ok


def test_watch_threshold_from_the_command_line(client: TestClient, server: str, tokens: dict[str, str]) -> None:
    cluster, model = make_cluster(client), make_model(client)
    env = {"MESHPLAN_URL": server, "MESHPLAN_TOKEN": tokens["write"], "PATH": "/usr/bin:/bin"}

    def meshplan(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "api.cli", "watch", str(cluster["id"]), str(model["id"]), *args]
        return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)

    before = ok(client.get("/v1/watches"))["total"]
    watch_name = name("w")
    good = meshplan("--name", watch_name, "--gbs", "64", "--seq-len", "4096", "--threshold", "12")
    assert good.returncode == 0, good.stderr
    watches = ok(client.get("/v1/watches"))["items"]
    assert [w["switch_threshold_pct"] for w in watches if w["name"] == watch_name] == [12.0]

    bad = meshplan("--name", name("w"), "--gbs", "64", "--seq-len", "4096", "--threshold", "150")
    assert bad.returncode == 2 and "--threshold" in bad.stderr and "0 and 100" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1 and "Traceback" not in bad.stderr
    assert ok(client.get("/v1/watches"))["total"] == before + 1
