"""Every error a client can cause: the status, the field path and the rule, and nothing stored."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from api.app import create_app
from store.db import Database
from store.models import Cluster, Job, Model
from store.settings import Settings
from tests.api.helpers import INVENTORY, LLAMA_HF, TRAINING, make_cluster, make_model, name, ok, wait_job
from tests.optimizer.helpers import live_and_failed_pools
from workers.dispatch import CeleryDispatcher


def _count(db: Database, model: type) -> int:
    with db.session() as s:
        return int(s.scalar(select(func.count()).select_from(model)) or 0)


def test_tokens_401_and_403(client: TestClient, tokens: dict[str, str]) -> None:
    assert client.get("/v1/clusters", headers={"Authorization": ""}).status_code == 401
    assert client.get("/v1/clusters", headers={"Authorization": "Bearer nope"}).status_code == 401
    assert client.get("/v1/clusters", headers={"Authorization": f"Bearer {tokens['revoked']}"}).status_code == 401
    reader = {"Authorization": f"Bearer {tokens['read']}"}
    assert client.get("/v1/clusters", headers=reader).status_code == 200
    r = client.post("/v1/clusters", json={"name": name("c"), "inventory": INVENTORY}, headers=reader)
    assert r.status_code == 403 and "write" in r.json()["detail"]


def test_open_reads_setting(api_settings: Settings, api_db: Database) -> None:
    app = create_app(api_settings.model_copy(update={"open_reads": True}), api_db)
    with TestClient(app) as c:
        assert c.get("/v1/clusters").status_code == 200
        assert c.post("/v1/clusters", json={"name": "x", "inventory": INVENTORY}).status_code == 401


def test_bad_inventory_is_422_with_the_field_and_stores_nothing(client: TestClient, api_db: Database) -> None:
    before = _count(api_db, Cluster)
    bad = {"pools": [{"name": "p", "gpu": "H100-SXM-80GB", "nodes": 1, "gpus_per_node": 0}]}
    r = client.post("/v1/clusters", json={"name": name("c"), "inventory": bad})
    assert r.status_code == 422
    item = r.json()["detail"][0]
    assert item["loc"][-1] == "gpus_per_node" and "greater than or equal to 1" in item["msg"]
    r = client.post(
        "/v1/clusters",
        json={"name": name("c"), "inventory": {"pools": [{**bad["pools"][0], "gpus_per_node": 8, "gpu": "Z9000"}]}},
    )
    assert r.status_code == 422 and "unknown gpu 'Z9000'" in r.json()["detail"][0]["msg"]
    r = client.post("/v1/clusters", json={"name": "bad name!", "inventory": INVENTORY})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "name"]
    r = client.post(
        "/v1/clusters/import/yaml",
        params={"name": name("y")},
        content="pools: [",
        headers={"Content-Type": "application/yaml"},
    )
    assert r.status_code == 422 and "YAML" in r.json()["detail"][0]["msg"]
    nul = {"pools": [{"name": "p", "gpu": "H100-SXM-80GB", "nodes": [{"name": "a\u0000b"}], "gpus_per_node": 8}]}
    r = client.post("/v1/clusters", json={"name": name("c"), "inventory": nul})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"][-1] == "name"
    assert _count(api_db, Cluster) == before


def test_conflicts_are_409(client: TestClient) -> None:
    c = make_cluster(client)
    r = client.post("/v1/clusters", json={"name": c["name"], "inventory": INVENTORY})
    assert r.status_code == 409 and "exists" in r.json()["detail"]
    m = make_model(client)
    body = {"cluster_id": c["id"], "model_id": m["id"], "workload": TRAINING}
    key = name("k")
    ok(client.post("/v1/jobs", json=body, headers={"Idempotency-Key": key}), 202)
    r = client.post(
        "/v1/jobs", json={**body, "workload": {**TRAINING, "global_batch_size": 128}}, headers={"Idempotency-Key": key}
    )
    assert r.status_code == 409 and "Idempotency-Key" in r.json()["detail"]


def test_job_input_errors_name_the_field(client: TestClient, api_db: Database) -> None:
    c, m = make_cluster(client), make_model(client)
    base = {"cluster_id": c["id"], "model_id": m["id"], "workload": TRAINING}
    jobs_before = _count(api_db, Job)
    cases = [
        ({**base, "search": {"pins": ["tp=3"]}}, "pin.tp", "num_attention_heads=32"),
        ({**base, "time_limit_s": 0.01}, "time_limit", "between 0.1"),
        ({**base, "time_limit_s": 5000}, "time_limit_s", "at most 120"),
        ({**base, "search": {"pins": ["tp=8", "tp=4"]}}, "pin", ""),
        ({**base, "search": {"pools": ["nope"]}}, "pool", "unknown pool 'nope'"),
        ({**base, "workload": {**TRAINING, "seq_len": 0}}, "seq_len", "greater than"),
        ({**base, "workload": {"mode": "serving"}}, "workload", ""),
        ({**base, "top_k": 99}, "top_k", "less than or equal to 20"),
        ({**base, "workload": {**TRAINING, "fp8_param_gather": True}}, "fp8_param_gather", "need precision fp8"),
        ({**base, "workload": {**TRAINING, "attention_kernel": "fa4"}}, "attention_kernel", "'fa3' or 'fa2'"),
        ({**base, "workload": {**TRAINING, "cuda_graphs": "all"}}, "cuda_graphs", "'layers' or 'full_iteration'"),
        ({**base, "search": {"pins": ["ep_dispatch=nccl"]}}, "pin.ep_dispatch", "alltoall, deepep"),
        ({**base, "search": {"pins": ["shard_group=0"]}}, "pin.shard_group", "positive integer"),
        ({**base, "search": {"pins": ["shard_scope=all"]}}, "pin.shard_scope", "states, weights"),
        ({**base, "search": {"pins": ["shard_scope=weights"]}}, "pin.shard_scope", "not available in megatron"),
        (
            {**base, "workload": {**TRAINING, "framework": "torchtitan"}, "search": {"pins": ["offload_layers=8"]}},
            "pin.offload_layers",
            "not available in torchtitan",
        ),
    ]
    for body, field, rule in cases:
        r = client.post("/v1/jobs", json=body)
        assert r.status_code == 422, (body, r.text)
        item = r.json()["detail"][0]
        assert field in ".".join(str(x) for x in item["loc"]), (field, item)
        assert rule in item["msg"], (rule, item)
    assert client.post("/v1/jobs", json={**base, "cluster_id": 10**8}).status_code == 404
    assert client.post("/v1/jobs", json={**base, "model_id": 10**8}).status_code == 404
    assert _count(api_db, Job) == jobs_before


def test_a_pin_only_the_search_space_refuses_is_a_failed_job_naming_it(client: TestClient) -> None:
    # Submission checks what the specs decide without building the search space; cp=3 on seq_len 4096 is found
    # when the job runs, and the failed job says why as the 422 would have.
    c, m = make_cluster(client), make_model(client)
    body = {"cluster_id": c["id"], "model_id": m["id"], "workload": TRAINING, "search": {"pins": ["cp=3"]}}
    job = wait_job(client, ok(client.post("/v1/jobs", json=body), 202)["id"])
    assert job["status"] == "failed" and job["error"].startswith("pin.cp: cp=3 contradicts seq_len=4096"), job


def test_serving_job_on_pools_without_a_healthy_gpu_is_422(client: TestClient, api_db: Database) -> None:
    # Serving used to pass the submission checks and then fail inside the job (max() of no pool: a 500-style error).
    inventory = {"pools": live_and_failed_pools("H100-SXM-80GB")}
    c, m = make_cluster(client, inventory), make_model(client)
    serving = {"mode": "inference", "prompt_len": 512, "output_len": 128, "batch": 8}
    jobs_before = _count(api_db, Job)
    for search, field in (({"pools": ["down"]}, "pools"), ({"pins": ["tp=3"]}, "pin.tp")):
        r = client.post(
            "/v1/jobs", json={"cluster_id": c["id"], "model_id": m["id"], "workload": serving, "search": search}
        )
        assert r.status_code == 422, r.text
        assert field in ".".join(str(x) for x in r.json()["detail"][0]["loc"]), r.json()
    assert _count(api_db, Job) == jobs_before


def test_404s_paging_and_body_caps(client: TestClient) -> None:
    for path in (
        "/v1/clusters/999999",
        "/v1/models/999999",
        "/v1/jobs/999999",
        "/v1/plans/999999",
        "/v1/watches/999999",
        "/v1/plans/999999/diff",
        "/v1/plans/999999/export/megatron",
    ):
        r = client.get(path)
        assert r.status_code == 404, (path, r.text)
    assert client.get("/v1/plans", params={"limit": 51}).status_code == 422
    assert client.get("/v1/plans", params={"offset": -1}).status_code == 422
    assert client.get("/v1/plans", params={"since": "2026-01-01T00:00:00"}).status_code == 422
    assert client.get("/v1/plans/1/export/pbs").status_code == 422
    huge = {"name": name("c"), "inventory": {"pools": INVENTORY["pools"], "pad": "x" * 300_000}}
    assert client.post("/v1/clusters", json=huge).status_code == 413


@pytest.fixture
def broken_db_app(api_settings: Settings) -> Iterator[TestClient]:
    cfg = api_settings.model_copy(update={"database_url": "postgresql+psycopg://postgres@127.0.0.1:1/none"})
    app = create_app(cfg, Database(cfg.database_url))
    with TestClient(app, raise_server_exceptions=False) as c:
        c.headers["Authorization"] = "Bearer whatever"
        yield c


def test_database_down_is_503(broken_db_app: TestClient) -> None:
    r = broken_db_app.get("/v1/clusters")
    assert r.status_code == 503 and "database" in r.json()["detail"]
    ready = broken_db_app.get("/readyz")
    assert ready.status_code == 503 and ready.json()["database"].startswith("unreachable")
    assert broken_db_app.get("/healthz").status_code == 200


def test_broker_down_is_503_and_stores_nothing(
    api_settings: Settings, api_db: Database, tokens: dict[str, str]
) -> None:
    cfg = api_settings.model_copy(update={"redis_url": "redis://127.0.0.1:1/0"})
    app = create_app(cfg, api_db, CeleryDispatcher(cfg))
    with TestClient(app, raise_server_exceptions=False) as c:
        c.headers["Authorization"] = f"Bearer {tokens['write']}"
        cl, m = make_cluster(c), make_model(c)
        before = _count(api_db, Job)
        r = c.post("/v1/jobs", json={"cluster_id": cl["id"], "model_id": m["id"], "workload": TRAINING})
        assert r.status_code == 503 and "broker" in r.json()["detail"]
        assert _count(api_db, Job) == before
        ready = c.get("/readyz")
        assert ready.status_code == 503 and ready.json()["broker"].startswith("broker unreachable")


def test_malformed_documents_are_422_never_a_traceback(client: TestClient, api_db: Database) -> None:
    # Inputs that reached a 500 (issue 16): HF config type confusions, YAML nested 900 deep, 5,000-digit integers.
    models_before, clusters_before = _count(api_db, Model), _count(api_db, Cluster)
    llama = LLAMA_HF
    cases = [
        ({**llama, "hidden_act": 5}, "hidden_act", "string"),
        ({"model_type": "gpt2", "n_layer": 2, "n_embd": {}, "n_head": 2, "vocab_size": 10}, "n_embd", "integer"),
        (
            {"model_type": "gpt2", "n_layer": 2, "n_embd": 64, "n_head": 2, "vocab_size": 10, "resid_pdrop": "high"},
            "resid_pdrop",
            "number",
        ),
        ({**llama, "model_type": "qwen2_moe", "num_experts": 4, "mlp_only_layers": 3}, "mlp_only_layers", "list"),
        ({**llama, "vocab_size": 10**16}, "vocab_size", "10^15"),
    ]
    for hf, field, rule in cases:
        r = client.post("/v1/models", json={"name": name("m"), "hf_config": hf})
        assert r.status_code == 422, (field, r.status_code, r.text[:300])
        item = r.json()["detail"][0]
        assert field in ".".join(str(x) for x in item["loc"]) and rule in item["msg"], item
    digits = "9" * 5000
    huge = f'{{"name": "{name("m")}", "hf_config": {{"model_type": "llama", "vocab_size": {digits}}}}}'
    r = client.post("/v1/models", content=huge, headers={"Content-Type": "application/json"})
    assert r.status_code == 422 and "not parseable JSON" in r.text, (r.status_code, r.text[:300])  # JSON unreadable
    deep = "a: " + "[" * 900 + "]" * 900
    big = "pools:\n  - name: p\n    gpu: H100-SXM-80GB\n    nodes: " + "9" * 5000 + "\n    gpus_per_node: 8\n"
    for path in ("/v1/clusters/import/yaml", "/v1/models/import/yaml"):
        for body in (deep, big):
            r = client.post(
                path, params={"name": name("y")}, content=body, headers={"Content-Type": "application/yaml"}
            )
            assert r.status_code == 422, (path, r.status_code, r.text[:300])
        assert client.get("/healthz").status_code == 200  # the connection still serves
    c, m = make_cluster(client), make_model(client)
    r = client.post(
        "/v1/jobs",
        json={
            "cluster_id": c["id"],
            "model_id": m["id"],
            "workload": TRAINING,
            "search": {"pins": ["tp=" + "9" * 5000]},
        },
    )
    assert r.status_code == 422 and "pin.tp" in ".".join(str(x) for x in r.json()["detail"][0]["loc"]), r.text[:300]
    r = client.post(
        "/v1/jobs",
        json={"cluster_id": c["id"], "model_id": m["id"], "workload": TRAINING, "search": {"pins": ["zero=9"]}},
    )
    assert r.status_code == 422 and "ZeRO stage 0-3" in r.json()["detail"][0]["msg"], r.text[:300]
    assert _count(api_db, Model) == models_before + 1 and _count(api_db, Cluster) == clusters_before + 1


def test_a_moe_layout_the_engine_cannot_run_is_422_naming_engine_and_rule(client: TestClient, api_db: Database) -> None:
    """Issue 39: pins that fix a serving expert layout the engine cannot run are refused at submission."""
    c, m = make_cluster(client), make_model(client, "qwen3-30b-a3b")
    serving = {"mode": "inference", "prompt_len": 512, "output_len": 128, "batch": 8, "engine": "trtllm"}
    jobs_before = _count(api_db, Job)
    cases = [
        (serving, ["tp=2", "dp=4", "ep=8"], "pin.tp", "trtllm runs attention data parallelism with attention TP 1"),
        ({**serving, "engine": "sglang"}, ["tp=1", "dp=256", "ep=256"], "pin.ep", "sglang places whole experts"),
    ]
    for workload, pins, field, rule in cases:
        body = {"cluster_id": c["id"], "model_id": m["id"], "workload": workload, "search": {"pins": pins}}
        r = client.post("/v1/jobs", json=body)
        assert r.status_code == 422, r.text
        item = r.json()["detail"][0]
        assert field in ".".join(str(x) for x in item["loc"]) and rule in item["msg"], item
    assert _count(api_db, Job) == jobs_before
