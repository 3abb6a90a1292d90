"""Measurements in, calibration out, through the real app and PostgreSQL [issue 14]."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from tests.api.helpers import INVENTORY, TRAINING, make_cluster, make_model, ok, wait_job

LOGS = Path(__file__).resolve().parents[1] / "optimizer" / "calibration" / "logs"


def _plan(client: TestClient, cluster_id: int, model_id: int, **extra: object) -> dict:
    body = {"cluster_id": cluster_id, "model_id": model_id, "workload": TRAINING, "time_limit_s": 30, **extra}
    job = wait_job(client, ok(client.post("/v1/jobs", json=body), 202)["id"])
    assert job["status"] == "succeeded", job
    return ok(client.get(f"/v1/plans/{job['plan_id']}"))


def _hidden(plan: dict, compute: float) -> float:
    """The step time of the plan's configuration on a cluster whose compute runs at `compute` x the sourced rate."""
    from optimizer.costmodel.estimate import estimate
    from optimizer.spec.calibration import ClusterCalibration, PoolCalibration
    from optimizer.spec.cluster_loading import build_cluster
    from optimizer.spec.model_loading import load_model_preset
    from optimizer.spec.parallel_config import ParallelConfig
    from optimizer.spec.workload import TrainingWorkload

    cal = ClusterCalibration(pools={"h100": PoolCalibration(compute=compute)})
    cluster = build_cluster({"name": "c", **INVENTORY}).with_calibration(cal)
    cfg = ParallelConfig.model_validate(plan["result"]["plan"]["config"])
    t = estimate(load_model_preset("llama-3-8b"), cluster, TrainingWorkload(**TRAINING), cfg).step_time_s
    assert t is not None
    return t


def test_measure_calibrate_and_plan_with_it(client: TestClient) -> None:
    cluster, model = make_cluster(client), make_model(client)
    plans = [
        _plan(client, cluster["id"], model["id"], search={"pins": pins})
        for pins in (
            ["tp=1", "pp=1"],
            ["tp=2", "pp=1"],
            ["tp=4", "pp=2"],
            ["tp=8", "pp=1"],
            ["tp=2", "pp=2"],
            ["tp=1", "pp=4"],
        )
    ]
    plan = plans[0]
    assert plan["calibration_id"] is None
    predicted = plan["step_time_s"]
    # the cluster computes at 75% of the sourced rate: every run is slower than planned
    for p in plans:
        t = _hidden(p, 0.75)
        m = ok(client.post(f"/v1/plans/{p['id']}/measurements", json={"step_time_s": t}), 201)
        assert abs(m["error"] - (p["step_time_s"] / t - 1)) < 1e-9 and m["uncalibrated_step_s"] == p["step_time_s"]
    listed = ok(client.get(f"/v1/plans/{plan['id']}/measurements"))
    assert len(listed) == 1 and listed[0]["calibrated_step_s"] is None  # no calibration yet

    cal = ok(client.post(f"/v1/clusters/{cluster['id']}/calibrations"))
    assert cal["created"] and cal["calibration"]["number"] == 1 and cal["calibration"]["measurements"] == 6
    compute = cal["calibration"]["constants"]["pools"]["h100"]["compute"]
    assert 0.70 < compute < 0.80, cal["calibration"]["report"]
    again = ok(client.post(f"/v1/clusters/{cluster['id']}/calibrations"))
    assert not again["created"] and again["calibration"]["number"] == 1  # same evidence, same version
    assert again["fit"]["measurements"] == 6 and len(again["fit"]["runs"]) == 6

    # the next plan of the same configuration uses it (and predicts slower), unless asked not to; the diff names the
    # calibration. Every main knob is pinned: among configurations whose difference is inside its interval the
    # planner may pick by headroom, and the calibration moves the memory reserve too.
    cfg = plan["result"]["plan"]["config"]
    knobs = {"tp": "tp", "pp": "pp", "dp": "dp", "cp": "cp", "mbs": "mbs", "vp": "vp", "zero": "zero_stage"}
    same = [f"{pin}={cfg[field]}" for pin, field in knobs.items()] + [f"recompute={cfg['recompute']}"]
    same.append(f"schedule={cfg['schedule']}")
    calibrated = _plan(client, cluster["id"], model["id"], search={"pins": same})
    assert calibrated["result"]["plan"]["config"]["mbs"] == cfg["mbs"]
    assert calibrated["calibration_id"] == cal["calibration"]["id"]
    # the hidden truth of that configuration: the calibrated prediction moves most of the way to it
    truth = _hidden(plan, 0.75)
    assert truth > predicted * 1.10
    assert predicted < calibrated["step_time_s"] and abs(calibrated["step_time_s"] - truth) < 0.5 * (truth - predicted)
    assert calibrated["diff"]["inputs"]["calibration"]["after"] == 1
    plain = _plan(client, cluster["id"], model["id"], search={"pins": same}, calibration="none")
    assert plain["calibration_id"] is None and abs(plain["step_time_s"] - predicted) < 1e-9 * predicted
    listed = ok(client.get(f"/v1/plans/{plan['id']}/measurements"))
    # predicted vs measured, before and after calibration
    assert abs(listed[0]["calibrated_step_s"] - truth) < 0.5 * (truth - predicted)

    # the pages: the plan shows its measurement against its predictions, the cluster its constants and the errors
    html = client.get(f"/plans/{plan['id']}").text
    assert 'id="measurements"' in html and html.count('class="measurement') == 1
    cluster_html = client.get(f"/clusters/{cluster['id']}").text
    assert 'data-name="compute"' in cluster_html and f'data-value="{compute}"' in cluster_html
    assert cluster_html.count('class="err-point" data-kind="uncalibrated"') == 6
    assert cluster_html.count('class="err-point" data-kind="planned"') == 6

    mid = listed[0]["id"]
    assert client.delete(f"/v1/plans/{plan['id']}/measurements/{mid}").status_code == 204
    assert client.delete(f"/v1/plans/{plan['id']}/measurements/{mid}").status_code == 404
    assert ok(client.get(f"/v1/plans/{plan['id']}/measurements")) == []
    # One run deleted, one more added exactly as the calibration predicts it: whether or not a constant moves, the
    # answer reports the measurements this refit used (the new one, not the deleted one), not the standing version's.
    calibrated = ok(client.get(f"/v1/plans/{plans[1]['id']}/measurements"))[0]["calibrated_step_s"]
    added = ok(client.post(f"/v1/plans/{plans[1]['id']}/measurements", json={"step_time_s": calibrated}), 201)
    third = ok(client.post(f"/v1/clusters/{cluster['id']}/calibrations"))
    labels = [r["label"] for r in third["fit"]["runs"]]
    assert third["fit"]["measurements"] == 6 and len(labels) == 6
    assert any(lab.startswith(f"measurement {added['id']} ") for lab in labels)
    assert not any(lab.startswith(f"measurement {mid} ") for lab in labels)


def test_log_ingestion_and_bad_measurements(client: TestClient) -> None:
    cluster, model = make_cluster(client), make_model(client)
    plan = _plan(client, cluster["id"], model["id"])
    text = (LOGS / "megatron.log").read_text()
    m = ok(
        client.post(
            f"/v1/plans/{plan['id']}/measurements/log",
            content=text.encode(),
            headers={"Content-Type": "text/plain"},
        ),
        201,
    )
    assert m["source"] == "megatron" and abs(m["measured_step_s"] - 5.4365) < 1e-9
    assert m["measurement"]["peak_allocated_gb"] > 60
    slow = ok(client.post(f"/v1/plans/{plan['id']}/measurements", json={"step_time_s": plan["step_time_s"] * 1.3}), 201)
    assert (
        slow["flagged"]
        and not ok(
            client.post(f"/v1/plans/{plan['id']}/measurements", json={"step_time_s": plan["step_time_s"] * 1.1}), 201
        )["flagged"]
    )

    for body, field in (
        ({"step_time_s": -1}, "step_time_s"),
        ({}, "measurement"),
        ({"peak_allocated_gb": 500.0}, "peak_allocated_gb"),
        ({"ttft_s": 0.2}, "ttft_s"),
    ):
        r = client.post(f"/v1/plans/{plan['id']}/measurements", json=body)
        assert r.status_code == 422, (body, r.text)
        assert field in r.text
    html = client.get(f"/plans/{plan['id']}").text
    assert 'class="measurement flagged"' in html and 'id="suspects"' in html and "(compute)" in html
    r = client.post(
        f"/v1/plans/{plan['id']}/measurements/log",
        content=b"no iteration lines\n",
        headers={"Content-Type": "text/plain"},
    )
    assert r.status_code == 422 and "log" in r.text
    assert len(ok(client.get(f"/v1/plans/{plan['id']}/measurements"))) == 3  # nothing half-stored
    assert client.post("/v1/plans/999999/measurements", json={"step_time_s": 1.0}).status_code == 404
    r = client.post(f"/v1/clusters/{make_cluster(client)['id']}/calibrations")
    assert r.status_code == 422 and "no training measurements" in r.text


def test_measure_and_calibrate_from_the_command_line(client: TestClient, server: str, tokens: dict[str, str]) -> None:
    """`meshplan measure` and `meshplan calibrate` as real processes against the served app."""
    import subprocess
    import sys

    cluster, model = make_cluster(client), make_model(client)
    plans = [
        _plan(client, cluster["id"], model["id"], search={"pins": pins})
        for pins in (["tp=1", "pp=1"], ["tp=2", "pp=1"], ["tp=4", "pp=2"])
    ]
    env = {"MESHPLAN_URL": server, "MESHPLAN_TOKEN": tokens["write"], "PATH": "/usr/bin:/bin"}

    def meshplan(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "api.cli", *args], capture_output=True, text=True, env=env, timeout=120
        )

    for p in plans:
        r = meshplan("measure", str(p["id"]), "--step-time", f"{_hidden(p, 0.8):.6f}", "--note", "cli")
        assert r.returncode == 0, r.stderr
        assert "Measurement" in r.stdout and f"of plan {p['id']}" in r.stdout
    r = meshplan("measure", str(plans[0]["id"]), "--log", str(LOGS / "megatron.log"))
    assert r.returncode == 0 and "(> 20%)" in r.stdout, r.stderr
    stored = ok(client.get(f"/v1/plans/{plans[0]['id']}/measurements"))
    assert len(stored) == 2 and stored[0]["measurement"]["note"] == "cli"
    assert stored[1]["source"] == "megatron" and abs(stored[1]["measured_step_s"] - 5.4365) < 1e-9
    r = meshplan("calibrate", str(cluster["id"]))
    assert r.returncode == 0 and "compute" in r.stdout and "new version" in r.stdout, r.stderr

    for args, needle in (
        (("measure", str(plans[0]["id"]), "--step-time", "-1"), "step_time_s"),
        (("measure", "999999", "--step-time", "1"), "plan"),
        (("measure", str(plans[0]["id"])), "measurement"),
        (("calibrate", str(make_cluster(client)["id"])), "no training measurements"),
    ):
        r = meshplan(*args)
        assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)
    env["MESHPLAN_TOKEN"] = ""
    r = meshplan("calibrate", str(cluster["id"]))
    assert r.returncode == 2 and "token" in r.stderr
    env["MESHPLAN_TOKEN"], env["MESHPLAN_URL"] = tokens["write"], "http://127.0.0.1:9"
    r = meshplan("measure", str(plans[0]["id"]), "--step-time", "1")
    assert r.returncode == 2 and "cannot reach" in r.stderr
