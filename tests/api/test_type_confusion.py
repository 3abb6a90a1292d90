"""Every write route, fed bodies whose values have the wrong type (0, null, true, 1e308, lists, strings, nested
mappings) one field at a time: a 4xx answer, never a 5xx [issue 37 §2: `{"inventory": {"pools": 0}}` and a pool
whose `gpu` was a list made the catalog service raise TypeError]."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from store.db import Database
from store.models import Cluster
from tests.api.helpers import INVENTORY, TRAINING, make_cluster, make_model, name, ok, wait_job
from tests.api.test_scheduler_inventory_api import KUBECTL, SINFO

# One node of each scheduler's output, with the fields the importers read (every other field is ignored by them).
READ = {
    "name",
    "hostname",
    "state",
    "state_flags",
    "gres",
    "features",
    "active_features",
    "reason",
    "metadata",
    "labels",
    "spec",
    "status",
    "capacity",
    "conditions",
    "unschedulable",
    "meta",
    "errors",
    "items",
    "nodes",
}


def _trimmed(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _trimmed(v) for k, v in value.items() if k in READ}
    return [_trimmed(v) for v in value[:1]] if isinstance(value, list) else value


SLURM, K8S = _trimmed(SINFO), _trimmed(KUBECTL)
# The values a mutated field takes: the type confusions fuzzing found (issue 37), plus strings and nesting.
CONFUSED: list[Any] = [0, None, True, 1e308, [1, "x"], "x", {"k": [None, {"k": 1}]}]
Path = tuple[str | int, ...]


def paths(value: Any, depth: int, prefix: Path = ()) -> Iterator[Path]:
    """Every field path in `value` down to `depth` (a list's first item stands for its items)."""
    if depth == 0:
        return
    items = value.items() if isinstance(value, dict) else ((0, value[0]),) if isinstance(value, list) and value else ()
    for key, child in items:
        yield (*prefix, key)
        yield from paths(child, depth - 1, (*prefix, key))


def replaced(value: Any, path: Path, new: Any) -> Any:
    """A copy of `value` with the field at `path` set to `new`."""
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: replaced(value[head], rest, new)}
    return [replaced(v, rest, new) if i == head else v for i, v in enumerate(value)]


def mutations(body: Any, depth: int) -> Iterator[tuple[Path, Any]]:
    """The body replaced whole, then each field in turn, by every confused value."""
    for path in [(), *paths(body, depth)]:
        for new in CONFUSED:
            yield path, replaced(body, path, new)


@pytest.fixture(scope="module")
def ids(client: TestClient) -> dict[str, int]:
    """A cluster, a model, a plan and a watch the routes with ids in their path write to."""
    cluster, model = make_cluster(client), make_model(client)
    body = {"cluster_id": cluster["id"], "model_id": model["id"], "workload": TRAINING, "time_limit_s": 20}
    job = wait_job(client, ok(client.post("/v1/jobs", json=body), 202)["id"])
    watch = ok(client.post("/v1/watches", json={**body, "name": name("w")}), 201)
    return {"cluster": cluster["id"], "model": model["id"], "plan": job["plan_id"], "watch": watch["id"]}


# (method, path, a valid JSON body, how deep its fields are mutated); `{cluster}` etc. are filled from `ids`.
JSON_ROUTES: list[tuple[str, str, dict[str, Any], int]] = [
    ("POST", "/v1/clusters", {"name": "NAME", "inventory": INVENTORY}, 5),
    ("PUT", "/v1/clusters/{cluster}/inventory", {"inventory": INVENTORY, "cause": "fuzz"}, 5),
    ("PATCH", "/v1/clusters/{cluster}/nodes/h100-000", {"state": "drained"}, 2),
    ("PUT", "/v1/clusters/{cluster}/sync-source", {"source": {"kind": "slurm"}}, 3),
    ("POST", "/v1/clusters/{cluster}/sync", {"replan": False}, 2),
    ("POST", "/v1/clusters/sync?name=NAME", {"source": {"kind": "k8s", "context": "none"}}, 3),
    ("POST", "/v1/clusters/import/slurm?name=NAME", {"nodes": SLURM, "topology": ""}, 4),
    ("POST", "/v1/clusters/import/kubernetes?name=NAME", {"nodes": K8S}, 5),
    ("POST", "/v1/gpu-types", {"name": "NAME", "bf16_tflops": 900, "memory_gb": 80, "memory_tbps": 3}, 2),
    ("POST", "/v1/models", {"name": "NAME", "hf_config": {"model_type": "llama", "num_hidden_layers": 4}}, 3),
    ("POST", "/v1/models/{model}/versions", {"hf_config": {"model_type": "llama", "hidden_size": 1024}}, 3),
    ("POST", "/v1/jobs", {"cluster_id": 0, "model_id": 0, "workload": TRAINING, "time_limit_s": 1}, 3),
    ("POST", "/v1/watches", {"name": "NAME", "cluster_id": 0, "model_id": 0, "workload": TRAINING}, 3),
    ("POST", "/v1/plans/{plan}/measurements", {"step_time_s": 1.5, "note": "x"}, 2),
]
# (path, content type, a valid text body as a mapping, dumped as YAML) and the text/plain routes.
TEXT_ROUTES: list[tuple[str, str, dict[str, Any]]] = [
    ("/v1/clusters/import/yaml?name=NAME", "application/yaml", INVENTORY),
    ("/v1/models/import/yaml?name=NAME", "application/yaml", {"model_type": "llama", "num_hidden_layers": 4}),
    ("/v1/clusters/import/nvidia-smi-topo?name=NAME&gpu=H100-SXM-80GB", "text/plain", {"GPU0": "X"}),
    ("/v1/clusters/{cluster}/acceptance-tests?kind=nccl-tests", "text/plain", {"# nThread": 1}),
    ("/v1/plans/{plan}/measurements/log", "text/plain", {"step": 1}),
]


def _url(template: str, ids: dict[str, int]) -> str:
    return template.format(**ids).replace("NAME", name("f"))


def _fill(body: dict[str, Any], ids: dict[str, int]) -> dict[str, Any]:
    """The valid body with this run's ids and a fresh name."""
    filled = {**body, **({"name": name("f")} if body.get("name") == "NAME" else {})}
    return {**filled, **{k: ids[k.removesuffix("_id")] for k in ("cluster_id", "model_id") if k in filled}}


def _count(db: Database) -> int:
    with db.session() as s:
        return int(s.scalar(select(func.count()).select_from(Cluster)) or 0)


@pytest.mark.parametrize(("method", "path", "body", "depth"), JSON_ROUTES, ids=lambda v: str(v)[:40])
def test_json_routes_answer_type_confusion_without_a_server_error(
    client: TestClient, ids: dict[str, int], method: str, path: str, body: dict[str, Any], depth: int
) -> None:
    failures = []
    for field, mutated in mutations(_fill(body, ids), depth):
        r = client.request(method, _url(path, ids), json=mutated)
        if r.status_code >= 500:
            failures.append((".".join(map(str, field)), mutated if not field else None, r.status_code, r.text[:200]))
    assert not failures, failures[:5]


@pytest.mark.parametrize(("path", "media", "body"), TEXT_ROUTES, ids=lambda v: str(v)[:40])
def test_text_routes_answer_type_confusion_without_a_server_error(
    client: TestClient, ids: dict[str, int], path: str, media: str, body: dict[str, Any]
) -> None:
    failures = []
    for field, mutated in mutations(body, 3):
        text = yaml.safe_dump(mutated) if media == "application/yaml" else json.dumps(mutated)
        r = client.post(_url(path, ids), content=text.encode(), headers={"Content-Type": media})
        if r.status_code >= 500:
            failures.append((".".join(map(str, field)), r.status_code, r.text[:200]))
    assert not failures, failures[:5]


@pytest.mark.parametrize(
    "inventory",
    [
        {"pools": 0},
        {"pools": None},
        {"pools": True},
        {"pools": 1e308},
        {"pools": [{**INVENTORY["pools"][0], "gpu": ["H100-SXM-80GB"]}]},  # type: ignore[index]
        {"pools": [{**INVENTORY["pools"][0], "gpu": {"name": "H100-SXM-80GB"}}]},  # type: ignore[index]
        {**INVENTORY, "gpu_types": 3},
        {**INVENTORY, "gpu_types": [{"name": ["x"]}]},
    ],
)
def test_a_confused_inventory_is_422_naming_the_field_and_stores_nothing(
    client: TestClient, api_db: Database, inventory: dict[str, Any]
) -> None:
    before = _count(api_db)
    r = client.post("/v1/clusters", json={"name": name("c"), "inventory": inventory})
    assert r.status_code == 422, r.text
    bad = next(k for k in ("gpu_types", "pools") if k in inventory and inventory[k] != INVENTORY.get(k))
    assert bad in r.json()["detail"][0]["loc"], r.json()
    cluster = make_cluster(client)
    r = client.put(f"/v1/clusters/{cluster['id']}/inventory", json={"inventory": inventory})
    assert r.status_code == 422 and bad in r.json()["detail"][0]["loc"], r.text
    assert ok(client.get(f"/v1/clusters/{cluster['id']}"))["revision"] == 1
    r = client.post(
        "/v1/clusters/import/yaml",
        params={"name": name("y")},
        content=yaml.safe_dump(inventory),
        headers={"Content-Type": "application/yaml"},
    )
    assert r.status_code == 422 and bad in r.json()["detail"][0]["loc"], r.text
    assert _count(api_db) == before + 1  # only the valid cluster made above
