"""GET /v1/plans/{id}/next-measurement, `meshplan next-measurement` and the plan page's section [issue 33 §3]."""

from __future__ import annotations

from click.testing import Result
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from api.cli import app
from tests.api.helpers import TRAINING, make_cluster, make_model, ok, wait_job
from tests.api.test_acceptance_tests import NCCL_MULTI, POOL

RUNNER = CliRunner()
SERVING = {"mode": "inference", "prompt_len": 512, "output_len": 128, "batch": 8}


def _plan(client: TestClient, workload: dict, pins: list[str] | None = None) -> dict:
    cluster, model = make_cluster(client), make_model(client)
    body = {"cluster_id": cluster["id"], "model_id": model["id"], "workload": workload, "time_limit_s": 30}
    if pins:
        body["search"] = {"pins": pins}
    job = wait_job(client, ok(client.post("/v1/jobs", json=body), 202)["id"])
    assert job["status"] == "succeeded", job
    return ok(client.get(f"/v1/plans/{job['plan_id']}"))


def test_next_measurement_of_a_training_plan_and_the_serving_refusal(client: TestClient) -> None:
    plan = _plan(client, TRAINING, ["tp=2", "pp=1"])
    out = ok(client.get(f"/v1/plans/{plan['id']}/next-measurement", params={"top": 4}))
    assert (
        out["target"].startswith("tp2 pp1")
        and abs(out["step_time_s"] - plan["step_time_s"]) < 1e-6 * out["step_time_s"]
    )
    assert "no calibration" in out["basis"] and out["spread_before"] > 0 and len(out["candidates"]) == 4
    for c in out["candidates"]:
        assert c["spread_after"] <= out["spread_before"] + 1e-12 and c["gpu_hours"] > 0
        assert out["target"] in c["sentence"]
        if c["kind"] == "short_run":
            assert c["label"] in c["sentence"] and c["pins"]
    ranks = [c["reduction_per_gpu_hour"] for c in out["candidates"] if c["worth_it"]]
    assert ranks == sorted(ranks, reverse=True)
    # the plan page lists the top 3
    html = client.get(f"/plans/{plan['id']}").text
    assert 'id="next-measurement"' in html and html.count('class="next-measurement"') == 3

    serving = _plan(client, SERVING)
    r = client.get(f"/v1/plans/{serving['id']}/next-measurement")
    assert r.status_code == 422, r.text
    item = r.json()["detail"][0]
    assert item["loc"][-1] == "plan" and f"plan {serving['id']} is a serving plan" in item["msg"]
    assert 'id="next-measurement"' not in client.get(f"/plans/{serving['id']}").text
    assert client.get("/v1/plans/999999/next-measurement").status_code == 404
    assert client.get(f"/v1/plans/{plan['id']}/next-measurement", params={"steps": 0}).status_code == 422


def test_next_measurement_from_the_command_line(client: TestClient, server: str, tokens: dict[str, str]) -> None:
    """The client command against the served app (uvicorn on a port), in-process through typer's runner to stay fast
    (tests/api/test_measurements.py runs the same client code as real processes)."""
    plan = _plan(client, TRAINING, ["tp=4", "pp=1"])
    serving = _plan(client, SERVING)
    env = {"MESHPLAN_URL": server, "MESHPLAN_TOKEN": tokens["read"]}

    def meshplan(*args: str) -> Result:
        return RUNNER.invoke(app, ["next-measurement", *args], env=env)

    r = meshplan(str(plan["id"]), "--top", "3")
    assert r.exit_code == 0, r.output
    assert f"Plan {plan['id']} (tp4 pp1" in r.stdout and "Next measurement" in r.stdout and "would" in r.stdout
    for args, needle in (((str(serving["id"]),), "serving plan"), (("999999",), "plan")):
        r = meshplan(*args)
        assert r.exit_code == 2 and needle in r.stderr and "Traceback" not in r.output, r.output
        assert len(r.stderr.strip().splitlines()) == 1
    env["MESHPLAN_TOKEN"] = ""
    r = meshplan(str(plan["id"]))
    assert r.exit_code == 2 and "an API token is needed" in r.stderr


def test_an_acceptance_test_already_run_sets_its_constant_and_is_not_offered_again(client: TestClient) -> None:
    cluster, model = make_cluster(client, {"pools": [POOL]}), make_model(client)
    body = {"cluster_id": cluster["id"], "model_id": model["id"], "workload": TRAINING, "time_limit_s": 30}
    body["search"] = {"pins": ["tp=1", "pp=1", "dp=32", "zero=3"]}
    job = wait_job(client, ok(client.post("/v1/jobs", json=body), 202)["id"])
    assert job["status"] == "succeeded", job

    def labels() -> tuple[str, list[str]]:
        out = ok(client.get(f"/v1/plans/{job['plan_id']}/next-measurement", params={"top": 100}))
        return out["basis"], [c["label"] for c in out["candidates"]]

    basis, before = labels()
    assert "no calibration" in basis and any("two nodes" in label for label in before)
    r = client.post(
        f"/v1/clusters/{cluster['id']}/acceptance-tests",
        params={"kind": "nccl-tests", "pool": "h100"},
        content=NCCL_MULTI.encode(),
        headers={"Content-Type": "text/plain"},
    )
    assert r.status_code == 201, r.text
    basis, after = labels()  # not yet calibrated: the prior the fit would start from
    assert "set by acceptance tests" in basis and not any("two nodes" in label for label in after)
    ok(client.post(f"/v1/clusters/{cluster['id']}/calibrations"))
    basis, calibrated = labels()
    assert "calibration 1" in basis and not any("two nodes" in label for label in calibrated)
