"""The input and output polish of issue 48 §10, each as a newcomer meets it: an error naming the pool and the key
it meant, a card's memory in GiB beside GB, TTFT in milliseconds without an exponent, a hint for a new token on the
second start, /healthz without nulls, a model from a preset name through the API, names on the plan page."""

from __future__ import annotations

from pathlib import Path

import pytest
import uvicorn
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from api.cli import app, num
from optimizer.errors import DomainError
from optimizer.spec.cluster_loading import load_cluster_yaml
from tests.api.helpers import make_cluster, name, ok, solved_job, training_job

RUNNER = CliRunner()
MISSPELT = """
name: lab
pools:
  - name: h100
    gpu: H100-SXM-80GB
    nodes: 2
    gpus_per_node: 8
    inter_node: {nics_per_node: 8, gbit_per_s: 400}
"""


def test_a_misspelt_cluster_key_names_the_pool_and_the_key_meant() -> None:
    with pytest.raises(DomainError) as caught:
        load_cluster_yaml(MISSPELT)
    assert caught.value.field == "cluster.pools.h100.inter_node.gbit_per_s", caught.value.field
    assert "did you mean 'gbits_per_s'?" in caught.value.rule
    with pytest.raises(DomainError) as top:
        load_cluster_yaml(MISSPELT.replace("gpus_per_node", "gpu_per_node").replace("gbit_", "gbits_"))
    assert "did you mean 'gpus_per_node'?" in top.value.rule


def test_memory_says_gib_and_latency_has_no_exponent() -> None:
    serving = ["--mode", "inference", "--batch", "64", "--prompt-len", "8192", "--output-len", "2048"]
    r = RUNNER.invoke(app, ["estimate", "--model", "llama-2-70b", "--cluster", "dgx-h100", *serving, "--tp", "2"])
    assert r.exit_code == 1, r.output[-300:]  # does not fit
    assert "H100-SXM-80GB has 85.9 GB (80 GiB)" in r.output
    assert "e+0" not in r.output and "TTFT " in r.output
    assert [num(8430.2), num(12.345), num(0.0123)] == ["8,430", "12.3", "0.0123"]
    assert "e+" not in "".join(line for line in r.output.splitlines() if line.startswith("TTFT"))


def test_a_second_start_says_how_to_get_a_new_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(uvicorn, "run", lambda *_a, **_k: None)
    env = {"DATABASE_URL": f"sqlite:///{tmp_path / 'm.db'}"}
    first = RUNNER.invoke(app, ["serve"], env=env)
    second = RUNNER.invoke(app, ["serve"], env=env)
    assert first.exit_code == 0 and "created the first API token" in first.output, first.output
    assert second.exit_code == 0 and "meshplan token create --scope write" in second.output, second.output


def test_healthz_has_no_nulls_and_a_model_comes_from_a_preset(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    made = ok(client.post("/v1/models", json={"name": name("p"), "preset": "llama-3-8b"}), 201)
    assert made["num_layers"] == 32 and made["parameters"] > 7e9
    bad = client.post("/v1/models", json={"name": name("p"), "preset": "llama-9"})
    assert bad.status_code == 422 and "preset" in bad.text and "llama-3-8b" in bad.text
    both = client.post("/v1/models", json={"name": name("p"), "preset": "llama-3-8b", "spec": {"num_layers": 2}})
    assert both.status_code == 422


def test_the_plan_page_names_its_cluster_and_model(client: TestClient) -> None:
    c = make_cluster(client, {"pools": [{"name": "h", "gpu": "H100-SXM-80GB", "nodes": 1, "gpus_per_node": 8}]})
    m = ok(client.post("/v1/models", json={"name": name("named"), "preset": "llama-3-8b"}), 201)
    done = solved_job(client, training_job(c, m, 16, 10, seq_len=2048))
    token = client.headers["Authorization"].split()[1]
    page = client.get(f"/plans/{done['plan_id']}", cookies={"meshplan_token": token}).text
    assert f">{c['name']}</a> revision" in page and f">{m['name']}</a> version" in page
