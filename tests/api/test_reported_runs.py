"""Runs that ran are admitted, through the real app [issue 33 §4]: Llama 3.1 405B as NVIDIA's DGX Cloud
Benchmarking recipe lays it out on 512 H100, with Megatron's default fp32 gradients, which the model puts ~8 GB over
80 GiB, is reported as run (search.ran): its plan states the overrun, a measurement attaches to it, and the cluster's
calibration bounds the memory reserve with it so that the same configuration then fits. Bad input is a 422 naming
the field, with nothing stored."""

from __future__ import annotations

import json
from typing import Any

from fastapi.testclient import TestClient
from typer.testing import CliRunner

from api.cli import app
from tests.api.helpers import make_cluster, make_model, ok, wait_job
from tests.optimizer.helpers import llama405b_h100_512

H100_512 = {"pools": [{"name": "h100", "gpu": "H100-SXM-80GB", "nodes": 64, "gpus_per_node": 8}]}
WORKLOAD = {"mode": "training", "global_batch_size": 256, "seq_len": 8192}  # fp32 main grads, Megatron's default
RAN = llama405b_h100_512().model_dump(mode="json", exclude_defaults=True)


def _report(client: TestClient, cluster: dict[str, Any], model: dict[str, Any], **search: Any) -> dict[str, Any]:
    body = {
        "cluster_id": cluster["id"],
        "model_id": model["id"],
        "workload": WORKLOAD,
        "search": {"ran": RAN, **search},
    }
    job = wait_job(client, ok(client.post("/v1/jobs", json=body), 202)["id"])
    assert job["status"] == "succeeded", job
    plan: dict[str, Any] = ok(client.get(f"/v1/plans/{job['plan_id']}"))
    return plan


def test_a_run_the_planner_refuses_is_reported_measured_and_bounds_the_reserve(client: TestClient) -> None:
    cluster, model = make_cluster(client, H100_512), make_model(client, "llama-3.1-405b")
    plan = _report(client, cluster, model)
    est = plan["result"]["plan"]["estimate"]
    assert plan["solver_status"] == "REPORTED" and plan["result"]["plan"]["config"]["cp"] == 2
    assert est["admitted"] and not est["feasible"] and 5 < est["memory_overrun_gb"] < 12
    assert (
        plan["step_time_s"] == est["step_time_s"] > 0 and "Reported as run" in plan["result"]["explanation"]["summary"]
    )

    html = client.get(f"/plans/{plan['id']}").text
    assert 'id="overrun"' in html and "reported as run" in html and ">REPORTED<" in html
    path = f"/v1/plans/{plan['id']}/measurements"
    m = ok(client.post(f"{path}?cluster_id={cluster['id']}", json={"step_time_s": 40.0}), 201)
    assert m["planned_step_s"] == plan["step_time_s"] and m["predicted_memory_gb"] > 80
    cal = ok(client.post(f"/v1/clusters/{cluster['id']}/calibrations"))
    (reserve,) = [k for k in cal["calibration"]["report"]["constants"] if k["name"] == "memory_reserve"]
    assert reserve["value"] < 0.01 and f"measurement {m['id']} (plan {plan['id']})" in reserve["reason"]

    again = _report(client, cluster, model)  # reported again, priced with the calibration the run bounded
    est = again["result"]["plan"]["estimate"]
    assert again["calibration_id"] == cal["calibration"]["id"] and est["feasible"] and est["memory_overrun_gb"] is None


def test_bad_reports_and_measurements_are_refused_naming_the_field(client: TestClient) -> None:
    cluster, other = make_cluster(client, H100_512), make_cluster(client)
    model = make_model(client, "llama-3.1-405b")
    plan = _report(client, cluster, model)
    path = f"/v1/plans/{plan['id']}/measurements"
    for query, body, field in (
        (f"?cluster_id={other['id']}", {"step_time_s": 40.0}, "cluster_id"),  # a run of another cluster
        ("", {"step_time_s": 0}, "step_time_s"),
        ("", {"step_time_s": -40.0}, "step_time_s"),
        ("", {"peak_allocated_gb": 0}, "peak_allocated_gb"),
    ):
        r = client.post(path + query, json=body)
        assert r.status_code == 422 and field in r.text, (body, r.text)
    assert ok(client.get(path)) == []  # nothing stored

    jobs = ok(client.get(f"/v1/jobs?cluster_id={cluster['id']}"))["total"]
    base = {"cluster_id": cluster["id"], "model_id": model["id"], "workload": WORKLOAD}
    for search, field in (
        ({"ran": {**RAN, "tp": 3}}, "tp"),  # 128 heads over tp 3
        ({"ran": {**RAN, "dp": 8}}, "ran"),  # 1,024 GPUs on 512
        ({"ran": {**RAN, "tp": 0}}, "tp"),
        ({"ran": RAN, "pins": ["tp=8"]}, "pins"),
    ):
        r = client.post("/v1/jobs", json={**base, "search": search})
        assert r.status_code == 422 and field in r.text and "search" in r.text, (search, r.text)
    r = client.post("/v1/watches", json={**base, "name": "reported-watch", "search": {"ran": RAN}})
    assert r.status_code == 422 and "ran" in r.text
    assert ok(client.get(f"/v1/jobs?cluster_id={cluster['id']}"))["total"] == jobs


def test_report_run_from_the_command_line(client: TestClient, server: str, tokens: dict[str, str]) -> None:
    """`meshplan report-run` against the served app (in this process: typer's runner, the real HTTP round trips)."""
    cluster, model = make_cluster(client, H100_512), make_model(client, "llama-3.1-405b")
    env = {"MESHPLAN_URL": server, "MESHPLAN_TOKEN": tokens["write"]}
    layout = "--gbs 256 --seq-len 8192 --tp 8 --pp 8 --cp 2 --dp 4 --vp 8 --sp --zero 1 --tp-comm-overlap"
    command = ["report-run", str(cluster["id"]), str(model["id"]), *layout.split(" ")]
    good = CliRunner().invoke(app, [*command, "--step-time", "40"], env=env)
    assert good.exit_code == 0, good.output
    assert "REPORTED" in good.output and "memory overrun" in good.output and "Measurement" in good.output
    bad = CliRunner().invoke(app, [*command, "--tp", "3"], env=env)
    assert bad.exit_code == 2 and "search.ran" in bad.output and "Traceback" not in bad.output, bad.output
    (plan,) = ok(client.get(f"/v1/plans?cluster_id={cluster['id']}"))["items"]
    assert plan["solver_status"] == "REPORTED" and len(ok(client.get(f"/v1/plans/{plan['id']}/measurements"))) == 1


def test_estimate_states_the_overrun_of_a_run_that_ran() -> None:
    """`meshplan estimate --ran` (or --measured-step-time, --log): the step time and the overrun, not a refusal."""
    layout = "--gbs 256 --seq-len 8192 --tp 8 --pp 8 --cp 2 --dp 4 --vp 8 --sp --zero 1 --tp-comm-overlap"
    command = ["estimate", "--model", "llama-3.1-405b", "--cluster", "dgx-h100:64", *layout.split(" ")]
    doc = json.loads(CliRunner().invoke(app, [*command, "--ran", "--json"]).output)
    assert doc["admitted"] and 5 < doc["memory_overrun_gb"] < 12 and doc["step_time_s"] > 0
    assert doc["reason"].startswith("reported as run")
    text = CliRunner().invoke(app, [*command, "--measured-step-time", "40"]).output
    assert "ran (reported)" in text and "memory overrun" in text and "Measured vs predicted" in text
    plain = json.loads(CliRunner().invoke(app, [*command, "--json"]).output)
    assert not plain["admitted"] and plain["memory_overrun_gb"] == doc["memory_overrun_gb"]
