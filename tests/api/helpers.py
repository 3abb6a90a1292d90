"""Small helpers for driving the API."""

from __future__ import annotations

import time
import uuid
from typing import Any

from fastapi.testclient import TestClient

INVENTORY = {"pools": [{"name": "h100", "gpu": "H100-SXM-80GB", "nodes": 2, "gpus_per_node": 8}]}
TRAINING = {"mode": "training", "global_batch_size": 64, "seq_len": 4096}
# A small, valid HuggingFace llama config.json (the bad-input tests break one field of it at a time).
LLAMA_HF = {
    "model_type": "llama",
    "num_hidden_layers": 4,
    "hidden_size": 1024,
    "intermediate_size": 4096,
    "num_attention_heads": 8,
    "vocab_size": 32000,
}


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def ok(resp: Any, status: int = 200) -> Any:
    assert resp.status_code == status, (resp.status_code, resp.text)
    return resp.json() if resp.content else None


def make_cluster(c: TestClient, inventory: dict[str, Any] | None = None) -> dict[str, Any]:
    return ok(c.post("/v1/clusters", json={"name": name("c"), "inventory": inventory or INVENTORY}), 201)


def make_model(c: TestClient, preset: str = "llama-3-8b") -> dict[str, Any]:
    from optimizer.spec.model_loading import load_model_preset

    spec = load_model_preset(preset).model_dump(mode="json", exclude={"name"})
    return ok(c.post("/v1/models", json={"name": name("m"), "spec": spec}), 201)


def post_yaml(c: TestClient, path: str, text: str) -> Any:
    """POST a YAML document to an import endpoint (`path`) under a fresh name; the raw response."""
    return c.post(path, params={"name": name("y")}, content=text, headers={"Content-Type": "application/yaml"})


def make_watch(c: TestClient, cluster: dict[str, Any], model: dict[str, Any]) -> dict[str, Any]:
    """A watch re-planning TRAINING for `model` on `cluster` within 30 s."""
    body = {"name": name("w"), "cluster_id": cluster["id"], "model_id": model["id"], "workload": TRAINING}
    watch: dict[str, Any] = ok(c.post("/v1/watches", json={**body, "time_limit_s": 30}), 201)
    return watch


def training_job(
    cluster: dict[str, Any],
    model: dict[str, Any],
    gbs: int,
    time_limit_s: float,
    seq_len: int = 4096,
    **extra: Any,
) -> dict[str, Any]:
    """A POST /v1/jobs body: train `model` on `cluster` at global batch `gbs`, sequences of `seq_len` tokens; `extra`:
    other request fields (e.g. search)."""
    workload = {"mode": "training", "global_batch_size": gbs, "seq_len": seq_len}
    body = {"cluster_id": cluster["id"], "model_id": model["id"], "time_limit_s": time_limit_s, "workload": workload}
    return {**body, **extra}


def solved_job(c: TestClient, body: dict[str, Any]) -> dict[str, Any]:
    """Submit a job and wait for it; it must succeed."""
    done = wait_job(c, ok(c.post("/v1/jobs", json=body), 202)["id"])
    assert done["status"] == "succeeded", done
    return done


def wait_job(c: TestClient, job_id: int, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        job = ok(c.get(f"/v1/jobs/{job_id}"))
        if job["status"] in ("succeeded", "failed", "cancelled"):
            return job
        assert time.monotonic() < deadline, job
        time.sleep(0.1)
