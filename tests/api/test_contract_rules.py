"""The contract states its rules [issue 47 item 3]: booleans are refused where the schema says integer (a 422
naming the field, as the README promises), rules JSON Schema can say are in the OpenAPI document, a GET's 422 never
blames a body, and a path's methods are its own route's."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.api.helpers import INVENTORY, TRAINING, make_cluster, make_model, name


def _locs(r: Any) -> list[list[Any]]:
    return [d["loc"] for d in r.json()["detail"]]


def test_a_boolean_is_not_an_integer(client: TestClient) -> None:
    cluster, model = make_cluster(client), make_model(client)
    body = {"cluster_id": True, "model_id": model["id"], "workload": TRAINING}
    r = client.post("/v1/jobs", json=body)
    assert r.status_code == 422 and _locs(r) == [["body", "cluster_id"]], r.text  # was 202, a job on cluster 1
    assert "not a boolean" in r.json()["detail"][0]["msg"]
    r = client.post("/v1/jobs", json={**body, "cluster_id": cluster["id"], "workload": {**TRAINING, "seq_len": True}})
    assert r.status_code == 422 and _locs(r) == [["body", "workload", "seq_len"]], r.text
    pool = {**INVENTORY["pools"][0], "inter_node": {"nics_per_node": False, "gbits_per_s": 400}}
    r = client.post("/v1/clusters", json={"name": name("c"), "inventory": {"pools": [pool]}})
    assert r.status_code == 422, r.text  # was 201: a pool without NICs
    assert _locs(r) == [["body", "cluster", "pools", "0", "inter_node", "nics_per_node"]], r.text


def test_a_boolean_is_not_an_integer_whatever_the_content_type_spelling(client: TestClient) -> None:
    """Media types are case-insensitive (RFC 9110 §8.3.1): `Application/JSON` is JSON, and the boolean rule holds
    for it as for `application/json` (it answered 202 before) [issue 59 item 3]."""
    model = make_model(client)
    body = json.dumps({"cluster_id": True, "model_id": model["id"], "workload": TRAINING})
    for spelling in ("Application/JSON", "APPLICATION/JSON; charset=utf-8", "application/json"):
        r = client.post("/v1/jobs", content=body, headers={"Content-Type": spelling})
        assert r.status_code == 422 and _locs(r) == [["body", "cluster_id"]], (spelling, r.text)


def test_booleans_stay_welcome_where_the_schema_takes_them(client: TestClient) -> None:
    cluster, model = make_cluster(client), make_model(client)
    workload = {**TRAINING, "precision": "fp8", "fp8_param_gather": True}
    config = {"tp": 8, "pp": 1, "dp": 2, "sequence_parallel": True, "zero_stage": 1}
    body = {"cluster_id": cluster["id"], "model_id": model["id"], "workload": workload, "config": config}
    r = client.post("/v1/estimates", json=body)
    assert r.status_code == 200, r.text


def test_the_schema_states_the_rules_json_schema_can_say(client: TestClient) -> None:
    doc = client.get("/openapi.json").json()
    comps = doc["components"]["schemas"]
    inventory = comps["ClusterCreate"]["properties"]["inventory"]
    assert inventory["required"] == ["pools"] and inventory["properties"]["pools"]["minItems"] == 1
    rules = comps["TrainingWorkload"]["allOf"]
    fp8 = next(r for r in rules if "fp8_param_gather" in r["if"]["properties"])
    assert fp8["then"]["properties"]["precision"] == {"const": "fp8"} and fp8["then"]["required"] == ["precision"]
    # and the server enforces exactly that: an inventory without pools, fp8 weights without fp8 precision
    r = client.post("/v1/clusters", json={"name": name("c"), "inventory": {"pools": []}})
    assert r.status_code == 422
    cluster, model = make_cluster(client), make_model(client)
    bad = {**TRAINING, "precision": "bf16", "fp8_param_gather": True}
    r = client.post("/v1/jobs", json={"cluster_id": cluster["id"], "model_id": model["id"], "workload": bad})
    assert r.status_code == 422 and "fp8_param_gather" in str(_locs(r))


def test_a_get_s_422_never_blames_the_body(client: TestClient) -> None:
    cluster = make_cluster(client)
    r = client.get(f"/v1/clusters/{cluster['id']}/revisions/1/diff")
    assert r.status_code == 422 and _locs(r) == [["query", "against"]], r.text


def test_options_on_a_fixed_path_is_not_answered_by_its_id_sibling(client: TestClient) -> None:
    r = client.options("/v1/clusters/sync")
    assert r.status_code == 405 and r.headers["allow"] == "POST", r.headers  # was "GET, POST, DELETE"
    r = client.options("/v1/clusters/5")
    assert r.status_code == 405 and r.headers["allow"] == "GET, DELETE", r.headers


def test_a_method_the_sync_path_does_not_answer_is_405_not_a_bad_cluster_id(client: TestClient) -> None:
    """`GET /v1/clusters/sync?name=0` is the sync operation's path (POST only), not cluster "sync" of
    `/v1/clusters/{cluster_id}`: 405 with its Allow header, not a 422 blaming a path parameter [issue 59 item 3]."""
    for method in ("GET", "DELETE"):
        r = client.request(method, "/v1/clusters/sync", params={"name": "0"})
        assert r.status_code == 405, (method, r.text)
        assert r.headers["Allow"] == "POST", r.headers
    bad = client.get("/v1/clusters/abc")  # no path of the document: the parameter's own 422 stands
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["path", "cluster_id"]


def test_one_type_policy_at_every_door(client: TestClient) -> None:
    """No boolean as a number and no string as an integer, in a JSON body, a model spec and a YAML inventory; a key
    named twice is an error naming it; nothing is stored [issue 59 item 3]."""
    from optimizer.spec.model_loading import load_model_preset

    cluster, model = make_cluster(client), make_model(client)
    r = client.post("/v1/jobs", json={"cluster_id": str(cluster["id"]), "model_id": model["id"], "workload": TRAINING})
    assert r.status_code == 422 and _locs(r) == [["body", "cluster_id"]], r.text  # was 202: "1" read as 1
    assert r.json()["detail"][0]["msg"] == "must be a number, not a string"
    spec = load_model_preset("llama-3-8b").model_dump(mode="json", exclude={"name"})
    before = client.get("/v1/models").json()
    for bad in (True, "32"):
        r = client.post("/v1/models", json={"name": name("m"), "spec": {**spec, "num_layers": bad}})
        assert r.status_code == 422, (bad, r.text)  # true was a 1-layer model (201)
        assert r.json()["detail"][0]["loc"][-1] == "num_layers", r.text
    r = client.post(
        "/v1/clusters/import/yaml",
        params={"name": name("y")},
        content="pools:\n- name: h100\n  gpu: H100-SXM-80GB\n  nodes: '16'\n  gpus_per_node: 8\n",
        headers={"Content-Type": "application/yaml"},
    )
    assert r.status_code == 422 and "nodes" in r.text and "not a string" in r.text, r.text
    dup = "pools:\n- name: h100\n  gpu: H100-SXM-80GB\n  nodes: 2\n  nodes: 4\n  gpus_per_node: 8\n"
    r = client.post(
        "/v1/clusters/import/yaml",
        params={"name": name("y")},
        content=dup,
        headers={"Content-Type": "application/yaml"},
    )
    assert r.status_code == 422 and "duplicate key 'nodes' (line 5)" in r.text, r.text
    workload = json.dumps(TRAINING)
    body = f'{{"cluster_id": {cluster["id"]}, "cluster_id": 1, "model_id": {model["id"]}, "workload": {workload}}}'
    r = client.post("/v1/jobs", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 422 and "duplicate key 'cluster_id'" in r.text, r.text
    assert client.get("/v1/models").json() == before


def test_a_model_file_says_numbers_as_numbers_and_each_key_once(tmp_path: Path) -> None:
    """YAML 1.1 reads `yes` as true: a model file's `num_layers: yes` is refused, not a 1-layer model; a key named
    twice names the key and its line [issue 59 item 3]."""
    from optimizer.errors import DomainError
    from optimizer.spec.model_loading import load_model_file

    fields = "hidden_size: 4096\nffn_hidden_size: 14336\nnum_attention_heads: 32\nvocab_size: 128256\n"
    for text, said in (
        ("num_layers: yes\n" + fields, "must be a number, not a boolean"),
        ("num_layers: '32'\n" + fields, "must be a number, not a string"),
        ("num_layers: 32\n" + fields + "num_layers: 16\n", "duplicate key 'num_layers' (line 6)"),
    ):
        path = tmp_path / "model.yaml"
        path.write_text(text)
        with pytest.raises(DomainError, match=re.escape(said)):
            load_model_file(path)
    path.write_text("num_layers: 32\n" + fields)
    assert load_model_file(path).num_layers == 32
