"""POST /v1/estimates: one configuration priced as `meshplan estimate` prices it, serving latency percentiles at the
workload's rate or concurrency; bad serving loads and engine limits are 422 naming the field (issue 39)."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy import func, select

from store.db import Database
from store.models import Job
from tests.api.helpers import make_cluster, make_model, ok

SERVING = {"mode": "inference", "prompt_len": 512, "output_len": 128}


def test_an_estimate_reports_latency_percentiles_at_a_rate_and_a_concurrency(client: TestClient) -> None:
    c, m = make_cluster(client), make_model(client)
    base = {"cluster_id": c["id"], "model_id": m["id"], "config": {"tp": 1}}
    plain = ok(client.post("/v1/estimates", json={**base, "workload": SERVING}))
    assert plain["load_latency"] is None and plain["tpot_s"] > 0
    rated = ok(client.post("/v1/estimates", json={**base, "workload": {**SERVING, "rate": 6, "objective": "gpus"}}))
    users = ok(client.post("/v1/estimates", json={**base, "workload": {**SERVING, "concurrency": 12}}))
    assert rated["load_latency"]["rate_per_replica"] == 6 and users["load_latency"]["users_per_replica"] == 12
    for doc in (rated, users):
        for which in ("ttft", "tpot"):
            p = doc["load_latency"][which]
            assert 0 < p["p50_s"] <= p["p90_s"] <= p["p99_s"]
    eager = ok(client.post("/v1/estimates", json={**base, "workload": {**SERVING, "cuda_graphs": False}}))
    assert eager["tpot_s"] > plain["tpot_s"]


def test_bad_serving_loads_and_limits_are_422_and_store_nothing(client: TestClient, api_db: Database) -> None:
    c, m = make_cluster(client), make_model(client)
    with api_db.session() as s:
        jobs_before = s.scalar(select(func.count()).select_from(Job))
    for bad, field in (
        ({"rate": 0, "objective": "gpus"}, "rate"),
        ({"concurrency": 0}, "concurrency"),
        ({"memory_fraction": 0}, "memory_fraction"),
        ({"memory_fraction": 1.5}, "memory_fraction"),
        ({"rate": 2, "concurrency": 3, "objective": "gpus"}, "concurrency"),
        ({"chunked_prefill": "yes"}, "chunked_prefill"),
        ({"trtllm_backend": "onnx"}, "trtllm_backend"),
    ):
        workload = {**SERVING, **bad}
        for path, body in (
            ("/v1/estimates", {"cluster_id": c["id"], "model_id": m["id"], "config": {"tp": 1}, "workload": workload}),
            ("/v1/jobs", {"cluster_id": c["id"], "model_id": m["id"], "workload": workload}),
        ):
            r = client.post(path, json=body)
            assert r.status_code == 422, (path, bad, r.text)
            item = r.json()["detail"][0]
            assert field in ".".join(str(x) for x in item["loc"]) + item["msg"], (path, bad, item)
    with api_db.session() as s:
        assert s.scalar(select(func.count()).select_from(Job)) == jobs_before
    missing = {"cluster_id": 10**8, "model_id": m["id"], "config": {"tp": 1}, "workload": SERVING}
    assert client.post("/v1/estimates", json=missing).status_code == 404
