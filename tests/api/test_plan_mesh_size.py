"""The plan page of a plan on a cluster at the node cap draws one page of its device mesh (?nodes_from= pages on),
without walking the cluster's node list [issue 37 item 4: the mesh built a row for every node]."""

from __future__ import annotations

import re
import time
from functools import cached_property
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.pages import router as pages
from api.pages.figures import device_mesh
from api.pages.router import MESH_NODES
from optimizer.spec.cluster_spec import MAX_NODES_PER_CLUSTER, NodePool
from tests.api.helpers import make_cluster, make_model, ok, solved_job
from tests.optimizer.helpers import llama405b_h100_512

RAN = llama405b_h100_512().model_dump(mode="json", exclude_defaults=True)
WORKLOAD = {"mode": "training", "global_batch_size": 256, "seq_len": 8192}


def _walks(monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], list[float]]:
    """Pools whose whole node list the device mesh builds (the placement, planner code, reads its hosts), and the
    seconds each mesh took."""
    walked: list[str] = []
    took: list[float] = []
    drawing = [False]
    build = NodePool.node_list.func  # type: ignore[attr-defined]

    def counted(pool: NodePool) -> Any:
        if drawing[0]:
            walked.append(pool.name)
        return build(pool)

    def mesh(*args: Any, **kw: Any) -> str:
        drawing[0], t0 = True, time.perf_counter()
        try:
            return device_mesh(*args, **kw)
        finally:
            drawing[0] = False
            took.append(time.perf_counter() - t0)

    prop = cached_property(counted)
    prop.__set_name__(NodePool, "node_list")
    monkeypatch.setattr(NodePool, "node_list", prop)
    monkeypatch.setattr(pages, "device_mesh", mesh)
    return walked, took


def test_plan_page_on_a_cluster_at_the_cap_draws_one_page_of_nodes(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    drained = {f"h100-{n:05d}": "drained" for n in (3, 60_000)}
    pool = {"name": "h100", "gpu": "H100-SXM-80GB", "gpus_per_node": 8, "node_states": drained}
    cluster = make_cluster(client, {"pools": [{**pool, "nodes": MAX_NODES_PER_CLUSTER}]})
    body = {"cluster_id": cluster["id"], "model_id": make_model(client, "llama-3.1-405b")["id"]}
    plan = solved_job(client, {**body, "workload": WORKLOAD, "search": {"ran": RAN}})["plan_id"]
    walked, took = _walks(monkeypatch)
    html = client.get(f"/plans/{plan}").text
    mesh = html[html.index('class="mesh"') :]
    mesh = mesh[: mesh.index("</svg>")]
    labels = re.findall(r'<text x="0" y="\d+">(h100-\d{5}[^<]*)</text>', mesh)
    assert len(labels) == MESH_NODES and labels[0] == "h100-00000 · h100-00000"  # the placed hosts first
    assert f"{MAX_NODES_PER_CLUSTER - MESH_NODES} more nodes not drawn" in mesh
    assert f"?nodes_from={MESH_NODES}" in html and f"of {MAX_NODES_PER_CLUSTER}" in html
    # 64 hosts placed (h100-00000 to -00064 but the drained -00003), then the others: -00003 (drained), -00065...
    deep = client.get(f"/plans/{plan}", params={"nodes_from": 59_990}).text
    mesh = deep[deep.index('class="mesh"') :]
    labels = re.findall(r'<text x="0" y="\d+">(h100-\d{5}[^<]*)</text>', mesh[: mesh.index("</svg>")])
    assert labels[0] == "h100-59990" and "h100-60000 (drained)" in labels and len(labels) == MESH_NODES
    assert walked == [], f"the plan page built the node list of {walked}"
    assert len(took) == 2, (
        took
    )  # two meshes drawn, neither building the node list (its time: benchmarks/cluster_pages.py)
    assert client.get(f"/plans/{plan}", params={"nodes_from": MAX_NODES_PER_CLUSTER + 1}).status_code == 422
    ok(client.get(f"/v1/plans/{plan}"))
