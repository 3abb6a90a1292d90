"""The OpenAPI document is the server: what it declares is what the server enforces, and the reverse."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from fastapi.testclient import TestClient

from store.settings import Settings
from tests.api.helpers import make_cluster, make_model, name, ok


def _limit_params(doc: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (path, p)
        for path, ops in doc["paths"].items()
        for op in ops.values()
        for p in op.get("parameters", [])
        if p["name"] == "limit" and p["in"] == "query"
    ]


def test_list_limit_maximum_is_documented_and_enforced(client: TestClient, api_settings: Settings) -> None:
    params = _limit_params(client.get("/openapi.json").json())
    assert len(params) >= 7
    top = api_settings.max_page_size
    for path, p in params:
        assert p["schema"]["maximum"] == top, path
    assert client.get("/v1/clusters", params={"limit": top}).status_code == 200
    r = client.get("/v1/clusters", params={"limit": top + 1})
    assert r.status_code == 422
    assert r.json()["detail"][0]["loc"][-1] == "limit"


def test_workload_without_mode_is_training_as_documented(client: TestClient) -> None:
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    assert "mode" not in schemas["TrainingWorkload"]["required"]
    assert schemas["TrainingWorkload"]["properties"]["mode"]["default"] == "training"
    assert "mode" in schemas["InferenceWorkload"]["required"]
    cluster, model = make_cluster(client), make_model(client)
    body = {
        "name": name("w"),
        "cluster_id": cluster["id"],
        "model_id": model["id"],
        "workload": {"global_batch_size": 64, "seq_len": 4096},
        "time_limit_s": 30,
    }
    watch = ok(client.post("/v1/watches", json=body), 201)
    assert watch["workload"]["mode"] == "training"
    r = client.post("/v1/watches", json={**body, "name": name("w"), "workload": {"mode": "serving"}})
    assert r.status_code == 422
    assert r.json()["detail"][0]["loc"] == ["body", "workload"]


def test_every_body_route_documents_413_and_422(client: TestClient) -> None:
    doc = client.get("/openapi.json").json()
    bodies = [(m, p, op) for p, ops in doc["paths"].items() for m, op in ops.items() if "requestBody" in op]
    assert bodies
    for method, path, op in bodies:
        assert {"413", "422"} <= set(op["responses"]), (method, path)


def test_unparseable_json_is_a_422(client: TestClient) -> None:
    """Nesting deeper than the parser's recursion limit was FastAPI's undocumented 400."""
    r = client.post("/v1/clusters", content=b"[" * 100_000, headers={"Content-Type": "application/json"})
    assert r.status_code == 422
    assert r.json()["detail"][0]["loc"][0] == "body"


def test_oversize_chunked_body_is_a_413(client: TestClient, api_settings: Settings) -> None:
    def chunks() -> Iterator[bytes]:
        for _ in range(api_settings.max_body_bytes // 10_000 + 2):
            yield b" " * 10_000

    r = client.post("/v1/clusters", content=chunks(), headers={"Content-Type": "application/json"})
    assert r.status_code == 413
    assert "request body above" in r.json()["detail"]


def test_405_allow_lists_every_method_of_the_path(client: TestClient) -> None:
    r = client.put("/v1/clusters")
    assert r.status_code == 405
    assert set(r.headers["allow"].split(", ")) == {"GET", "POST"}
    r = client.put("/v1/clusters/1")
    assert r.status_code == 405
    assert set(r.headers["allow"].split(", ")) == {"GET", "DELETE"}


def test_plan_history_times_are_date_times_not_numbers(client: TestClient) -> None:
    params = {p["name"]: p for p in client.get("/openapi.json").json()["paths"]["/v1/plans"]["get"]["parameters"]}
    assert params["until"]["schema"]["anyOf"][0]["format"] == "date-time"
    for bad in ("0.5", "1700000000", "-3e2"):
        r = client.get("/v1/plans", params={"until": bad})
        assert r.status_code == 422, bad
        assert r.json()["detail"][0]["loc"] == ["query", "until"]
    assert client.get("/v1/plans", params={"since": "2026-11-21T00:00:00Z"}).status_code == 200


def test_workload_flags_are_json_booleans(client: TestClient) -> None:
    cluster, model = make_cluster(client), make_model(client)
    workload = {"mode": "training", "global_batch_size": 64, "seq_len": 4096}
    body = {"cluster_id": cluster["id"], "model_id": model["id"], "time_limit_s": 30}
    for field, value in (("fused_loss", 0), ("fused_loss", "true"), ("flash_attention", 1)):
        r = client.post("/v1/watches", json={**body, "name": name("w"), "workload": {**workload, field: value}})
        assert r.status_code == 422, (field, value)
        assert r.json()["detail"][0]["loc"][-1] == field
