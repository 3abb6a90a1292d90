"""Goodput through the service and the command line (issue 36 §1): a pool's reliability stored with its inventory
and shown, a goodput plan's checkpoint, interval, hours lost and goodput in its JSON and on its page, and bad
reliability inputs refused with the field named (HTTP 422, CLI exit 2) and nothing stored."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from store.db import Database
from store.models import Cluster
from tests.api.helpers import make_cluster, make_model, name, ok, solved_job, training_job
from tests.api.test_cli import meshplan


def _inventory(**reliability: Any) -> dict[str, Any]:
    pool = {"name": "h100", "gpu": "H100-SXM-80GB", "nodes": 4, "gpus_per_node": 8}
    return {"pools": [{**pool, "reliability": reliability}]}


def _count(db: Database) -> int:
    with db.session() as s:
        return int(s.scalar(select(func.count()).select_from(Cluster)) or 0)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("gpu_failures_per_1000_node_days", -1.0),
        ("software_failures_per_1000_node_days", 0.0),
        ("checkpoint_write_gbytes_per_s_per_node", 0.0),
        ("storage_read_gbytes_per_s", -5.0),
        ("launch_s", 0.0),
        ("spare_nodes", 4),
        ("recovery", "prayer"),
        ("collective_timeout_s", 0.0),
        ("checkpoint_tier", "tape"),
    ],
)
def test_bad_reliability_is_422_naming_the_field_and_stores_nothing(
    client: TestClient, api_db: Database, field: str, value: float
) -> None:
    before = _count(api_db)
    r = client.post("/v1/clusters", json={"name": name("c"), "inventory": _inventory(**{field: value})})
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert len(detail) == 1 and field in ".".join(str(x) for x in detail[0]["loc"]) + detail[0]["msg"]
    assert _count(api_db) == before


def test_a_goodput_plan_shows_its_checkpoint_interval_and_hours_lost(client: TestClient) -> None:
    c = make_cluster(
        client, _inventory(gpu_failures_per_1000_node_days=1500.0, spare_nodes=0, recovery="manual", hang_share=0.3)
    )
    pools = ok(client.get(f"/v1/clusters/{c['id']}"))["pools"]
    assert pools[0]["reliability"]["gpu_failures_per_1000_node_days"] == 1500.0
    assert pools[0]["reliability_sourced"] is False
    assert pools[0]["reliability"]["recovery"] == "manual" and pools[0]["reliability"]["hang_share"] == 0.3
    m = make_model(client)
    body = training_job(c, m, 64, 30)
    body["workload"]["objective"] = "goodput"
    plan = ok(client.get(f"/v1/plans/{solved_job(client, body)['plan_id']}"))
    g = plan["result"]["goodput"]
    assert g is not None and plan["result"]["plan"]["estimate"]["goodput"] == g
    assert 0 < g["fraction"] < 1 and g["interval_s"] > 0 and g["lost_h_per_day"] > 0 and g["checkpoint_gb"] > 100
    assert plan["result"]["objective"] == "wall_s_per_useful_step"
    token = client.headers["Authorization"].split()[1]
    page = client.get(f"/plans/{plan['id']}", cookies={"meshplan_token": token})
    assert page.status_code == 200
    for row in ('id="goodput"', 'id="checkpoint"', 'id="checkpoint-interval"', 'id="hours-lost"', 'id="goodput-band"'):
        assert row in page.text
    lo, hi = g["fraction_interval"]
    assert f"(80%: {100 * lo:.1f}-{100 * hi:.1f}%)" in page.text  # the band on the page as in the JSON
    assert g["useful_tokens_per_s_interval"][0] <= g["useful_tokens_per_s"] <= g["useful_tokens_per_s_interval"][1]
    cluster_page = client.get(f"/clusters/{c['id']}", cookies={"meshplan_token": token})
    assert 'id="reliability"' in cluster_page.text and "1.5e+03" in cluster_page.text


ESTIMATE = ["estimate", "--model", "llama-3-8b", "--cluster", "dgx-h100:4", "--gbs", "64", "--seq-len", "4096"]


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--failure-rate", "0"], "--failure-rate"),
        (["--failure-rate", "-2"], "--failure-rate"),
        (["--checkpoint-gbps", "0"], "--checkpoint-gbps"),
        (["--spares", "4"], "--spares"),
        (["--spares", "-1"], "--spares"),
    ],
)
def test_bad_reliability_options_fail_in_one_line(args: list[str], option: str) -> None:
    r = meshplan(*ESTIMATE, "--tp", "8", "--dp", "4", *args)
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and option in lines[0], r.stderr


def test_cli_options_move_the_estimate_goodput() -> None:
    base = json.loads(meshplan(*ESTIMATE, "--tp", "8", "--dp", "2", "--json").stdout)["goodput"]
    worse = json.loads(
        meshplan(
            *ESTIMATE, "--tp", "8", "--dp", "2", "--failure-rate", "400", "--checkpoint-gbps", "0.5", "--json"
        ).stdout
    )["goodput"]
    assert worse["failures_per_day"] == pytest.approx(2 * 0.4)  # 2 nodes x 400 per 1,000 node-days
    assert worse["write_s"] > 10 * base["write_s"] and worse["fraction"] < base["fraction"]
    assert base["spare_nodes"] == 2


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--recovery", "prayer"], "--recovery"),
        (["--checkpoint-tier", "tape"], "--checkpoint-tier"),
        (["--collective-timeout", "0"], "--collective-timeout"),
        (["--checkpoint-interval", "-5"], "--checkpoint-interval"),
        (["--restart-history", "/nonexistent/sacct.txt"], "--restart-history"),
    ],
)
def test_bad_goodput_options_fail_in_one_line(args: list[str], option: str) -> None:
    r = meshplan(*ESTIMATE, "--tp", "8", "--dp", "4", *args)
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and option in lines[0], r.stderr


def test_goodput_options_and_a_restart_history_reach_the_estimate(tmp_path: Any) -> None:
    history = tmp_path / "sacct.txt"
    history.write_text(
        "JobID|State|Start|End|NNodes\n"
        "1|NODE_FAIL|2024-05-01T00:00:00|2024-05-02T00:00:00|2\n"
        "2|FAILED|2024-05-02T01:00:00|2024-05-03T00:00:00|2\n"
        "3|COMPLETED|2024-05-03T02:00:00|2024-05-04T00:00:00|2\n"
    )
    log = tmp_path / "train.log"
    log.write_text(
        "\n".join(
            f" [2024-05-01 {h:02d}:00:00] iteration {i:8d}/{1000:8d} | consumed samples: {i:12d} | "
            "elapsed time per iteration (ms): 360000.0 |"
            for h, i in ((0, 10), (1, 20), (2, 30), (4, 20), (5, 30), (6, 40))
        )
    )
    args = [*ESTIMATE, "--tp", "8", "--dp", "2", "--json"]
    base = json.loads(meshplan(*args).stdout)["goodput"]
    doc = json.loads(
        meshplan(
            *args,
            "--recovery",
            "manual",
            "--checkpoint-interval",
            "7200",
            "--checkpoint-tier",
            "memory",
            "--restart-history",
            str(history),
            "--training-log",
            str(log),
        ).stdout
    )
    g = doc["goodput"]
    assert g["interval_fixed"] and g["interval_s"] == 7200 and g["optimal_interval_s"] > 0
    assert g["checkpoint_tier"] == "memory" and g["restart_s"] > base["restart_s"] + 3600  # manual + measured gaps
    # The training log, applied after the job records, sets the rate: 1 restart over 4 h of running (6 h less 2 down)
    assert g["failures_per_day"] == pytest.approx(6.0, rel=1e-3)
    h = doc["restart_history"]
    assert h["interruptions"] == 2 and h["restart_s"] == pytest.approx(5400.0)
    assert h["uptime"] == pytest.approx(69 / 72) and 0 < h["predicted_ettr"] < 1
    t = h["training_log"]  # one restart: 2 h from the last line to the first, 10 steps redone, 30 of 6 h's 60
    assert t["restarts"] == 1 and t["downtime_s"] == [7200.0] and t["rework_steps"] == [10]
    assert t["measured_goodput"] == pytest.approx(30 * 360.0 / (6 * 3600))
    lo, hi = g["fraction_interval"]
    assert lo <= g["fraction"] <= hi
    assert sum(g[k] for k in g if k.endswith("_h_per_day") and k != "lost_h_per_day") == pytest.approx(
        g["lost_h_per_day"]
    )
