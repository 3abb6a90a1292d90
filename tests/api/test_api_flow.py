"""The whole path through the real app and PostgreSQL: cluster and model to a finished plan, history, diff, export."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from api.app import create_app
from store.db import Database
from store.settings import Settings
from tests.api.helpers import INVENTORY, TRAINING, make_cluster, make_model, make_watch, name, ok, post_yaml, wait_job

ROOT = Path(__file__).resolve().parents[2]


def test_cluster_model_job_plan_history_diff_export(client: TestClient) -> None:
    cluster = make_cluster(client)
    assert cluster["revision"] == 1 and cluster["healthy_gpus"] == 16
    model = make_model(client)
    body = {"cluster_id": cluster["id"], "model_id": model["id"], "workload": TRAINING, "time_limit_s": 30}
    key = name("key")
    job = ok(client.post("/v1/jobs", json=body, headers={"Idempotency-Key": key}), 202)
    again = ok(client.post("/v1/jobs", json=body, headers={"Idempotency-Key": key}), 202)
    assert again["id"] == job["id"]
    done = wait_job(client, job["id"])
    assert done["status"] == "succeeded" and done["plan_id"] and done["progress"]["best_objective"]
    first = ok(client.get(f"/v1/plans/{done['plan_id']}"))
    assert first["solver_status"] == "OPTIMAL" and first["gpus"] == 16
    assert first["result"]["plan"]["estimate"]["step_time_s"] == first["step_time_s"]

    # a node fails: a new revision, a new plan on 8 GPUs, the diff names it
    node = cluster["inventory"]["pools"][0]["name"] + "-001"
    patched = ok(client.patch(f"/v1/clusters/{cluster['id']}/nodes/{node}", json={"state": "failed"}))
    assert patched["created"] and patched["revision"]["number"] == 2 and patched["revision"]["diff"]["failed"] == [node]
    job2 = wait_job(client, ok(client.post("/v1/jobs", json=body), 202)["id"])
    second = ok(client.get(f"/v1/plans/{job2['plan_id']}"))
    assert second["previous_plan_id"] == first["id"] and second["gpus"] == 8 and second["cluster_revision"] == 2
    diff = ok(client.get(f"/v1/plans/{second['id']}/diff"))
    assert diff["against"] == first["id"] and diff["inventory"]["failed"] == [node]
    assert diff["diff"]["gpus_before"] == 16 and diff["diff"]["gpus_after"] == 8
    assert diff["diff"]["gpus_by_pool"] == {"h100": -8}

    history = ok(client.get("/v1/plans", params={"cluster_id": cluster["id"]}))
    assert [p["id"] for p in history["items"]] == [second["id"], first["id"]] and history["total"] == 2
    assert history["items"][0]["change"]
    one = ok(client.get("/v1/plans", params={"cluster_id": cluster["id"], "limit": 1, "offset": 1}))
    assert [p["id"] for p in one["items"]] == [first["id"]]

    megatron = ok(client.get(f"/v1/plans/{second['id']}/export/megatron"))
    assert "--tensor-model-parallel-size" in megatron["content"]
    # A DeepSpeed export comes from a plan made for DeepSpeed (a Megatron plan may use knobs DeepSpeed lacks).
    ds_body = {**body, "workload": {**TRAINING, "framework": "deepspeed"}}
    ds_plan = wait_job(client, ok(client.post("/v1/jobs", json=ds_body), 202)["id"])["plan_id"]
    ds = ok(client.get(f"/v1/plans/{ds_plan}/export/deepspeed"))
    assert ds["format"] == "json"
    bad = client.get(f"/v1/plans/{second['id']}/export/vllm")
    assert bad.status_code == 422 and "serving engine" in bad.json()["detail"][0]["msg"]

    revs = ok(client.get(f"/v1/clusters/{cluster['id']}/revisions"))
    assert [r["number"] for r in revs["items"]] == [2, 1]
    rd = ok(client.get(f"/v1/clusters/{cluster['id']}/revisions/2/diff"))
    assert rd["diff"]["failed"] == [node] and "failed" in rd["summary"]
    same = ok(
        client.put(f"/v1/clusters/{cluster['id']}/inventory", json={"inventory": patched["revision"]["inventory"]})
    )
    assert same["created"] is False and same["revision"]["number"] == 2


def test_imports_models_versions_and_watches(client: TestClient) -> None:
    yaml_text = (ROOT / "examples" / "hetero-cluster.yaml").read_text()
    c = ok(post_yaml(client, "/v1/clusters/import/yaml", yaml_text), 201)
    assert len(c["pools"]) >= 2 and c["pools"][0]["nodes_by_state"].get("drained") == 1
    topo = (ROOT / "examples" / "nvidia-smi-topo-dgx-h100.txt").read_text()
    t = ok(
        client.post(
            "/v1/clusters/import/nvidia-smi-topo",
            params={"name": name("t"), "gpu": "H100-SXM-80GB", "nodes": 4},
            content=topo,
            headers={"Content-Type": "text/plain"},
        ),
        201,
    )
    assert t["total_gpus"] == 32
    hf = __import__("json").loads((ROOT / "examples" / "qwen2-7b-config.json").read_text())
    m = ok(client.post("/v1/models", json={"name": name("qwen"), "hf_config": hf}), 201)
    assert m["version"] == 1 and m["num_layers"] == 28
    v = ok(client.post(f"/v1/models/{m['id']}/versions", json={"hf_config": {**hf, "num_hidden_layers": 32}}))
    assert v["created"] and v["version"]["number"] == 2 and v["version"]["num_layers"] == 32
    assert ok(client.get(f"/v1/models/{m['id']}/versions"))["total"] == 2
    gpus = ok(client.get("/v1/gpu-types"))
    assert any(g["name"] == "H100-SXM-80GB" and g["builtin"] for g in gpus)

    w = make_watch(client, t, m)
    r = ok(client.post(f"/v1/watches/{w['id']}/replan"), 202)
    done = wait_job(client, r["job"]["id"])
    assert done["status"] == "succeeded" and done["watch_id"] == w["id"]
    assert ok(client.get(f"/v1/watches/{w['id']}"))["last_plan_id"] == done["plan_id"]
    assert ok(client.get("/v1/plans", params={"watch_id": w["id"]}))["total"] == 1
    ok(client.delete(f"/v1/watches/{w['id']}"), 204)
    assert client.get(f"/v1/watches/{w['id']}").status_code == 404


def test_cancel_a_queued_or_running_job(client: TestClient) -> None:
    cluster = make_cluster(client, {"pools": [{"name": "p", "gpu": "H100-SXM-80GB", "nodes": 2, "gpus_per_node": 8}]})
    model = make_model(client)
    body = {"cluster_id": cluster["id"], "model_id": model["id"], "workload": TRAINING}
    job = ok(client.post("/v1/jobs", json=body), 202)
    r = client.delete(f"/v1/jobs/{job['id']}")
    if r.status_code == 409:  # it finished first
        assert "succeeded" in r.json()["detail"]
    else:
        assert ok(r)["cancel_requested"] is True
        assert wait_job(client, job["id"])["status"] in ("cancelled", "succeeded")
    assert client.delete(f"/v1/jobs/{job['id']}").status_code == 409


def test_health_ready_metrics(client: TestClient) -> None:
    assert ok(client.get("/healthz")) == {"status": "ok"}  # no nulls for what /readyz checks [issue 48 §10]
    ready = ok(client.get("/readyz"))
    assert ready["database"] == "ok" and ready["mode"] == "in-process"
    text = client.get("/metrics").text
    assert 'meshplan_jobs{state="succeeded"}' in text
    assert "meshplan_solve_time_seconds_bucket" in text and "meshplan_http_requests_total" in text
    assert INVENTORY  # the module constant is the one other tests post


def test_models_from_yaml_and_replan_on_inventory_change(
    api_settings: Settings, api_db: Database, tokens: dict[str, str]
) -> None:
    app = create_app(api_settings.model_copy(update={"replan_on_inventory_change": True}), api_db)
    with TestClient(app) as c:
        c.headers["Authorization"] = f"Bearer {tokens['write']}"
        yaml_text = (ROOT / "examples" / "my-model.yaml").read_text()
        m = ok(post_yaml(c, "/v1/models/import/yaml", yaml_text), 201)
        assert m["version"] == 1 and m["num_layers"] > 0
        bad = post_yaml(c, "/v1/models/import/yaml", "num_layers: -1")
        assert bad.status_code == 422 and "num_layers" in ".".join(map(str, bad.json()["detail"][0]["loc"]))
        cluster, model = make_cluster(c), make_model(c)
        w = make_watch(c, cluster, model)
        node = cluster["inventory"]["pools"][0]["name"] + "-001"
        r = ok(c.patch(f"/v1/clusters/{cluster['id']}/nodes/{node}", json={"state": "drained"}))
        assert len(r["replan_jobs"]) == 1
        done = wait_job(c, r["replan_jobs"][0])
        assert done["trigger"] == "inventory_change" and done["watch_id"] == w["id"] and done["status"] == "succeeded"
        assert ok(c.get(f"/v1/plans/{done['plan_id']}"))["gpus"] == 8


def test_cost_job_is_labelled_and_shown_as_a_price(client: TestClient) -> None:
    # Cost jobs were stored with the step-time objective and the plan page printed every objective in seconds.
    inventory = {
        "pools": [{"name": "h100", "gpu": "H100-SXM-80GB", "nodes": 1, "gpus_per_node": 8, "price_per_gpu_hour": 2.5}]
    }
    cluster, model = make_cluster(client, inventory), make_model(client)
    workload = {**TRAINING, "objective": "cost"}
    body = {"cluster_id": cluster["id"], "model_id": model["id"], "workload": workload, "time_limit_s": 30}
    job = ok(client.post("/v1/jobs", json=body), 202)
    assert job["objective"] == "price_per_step"
    done = wait_job(client, job["id"])
    assert done["status"] == "succeeded" and done["objective"] == "price_per_step"
    plan = ok(client.get(f"/v1/plans/{done['plan_id']}"))
    assert plan["objective"] == "price_per_step"
    token = client.headers["Authorization"].split()[1]
    page = client.get(f"/plans/{plan['id']}", cookies={"meshplan_token": token})
    assert page.status_code == 200 and "price per step" in page.text and " per step</td>" in page.text
    assert '<td id="framework">megatron' in page.text  # the framework the plan runs on (and its exports)
