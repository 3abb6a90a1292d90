"""A cluster larger than any real one is refused with the field named; the cluster page of a large one lists its
nodes a page at a time [issue 37 §3: 10 pools x 100,000 nodes were accepted and the page took 9 s]."""

from __future__ import annotations

import re
from typing import Any

import yaml
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from api.pages.router import NODES_SHOWN
from optimizer.spec.cluster_spec import MAX_NODES_PER_CLUSTER, MAX_NODES_PER_POOL
from store.db import Database
from store.models import Cluster
from tests.api.helpers import INVENTORY, make_cluster, name, ok


def _pools(count: int, nodes: int, **extra: Any) -> dict[str, Any]:
    pool = {"gpu": "H100-SXM-80GB", "gpus_per_node": 8, "nodes": nodes, **extra}
    return {"pools": [{**pool, "name": f"p{i}"} for i in range(count)]}


def _count(db: Database) -> int:
    with db.session() as s:
        return int(s.scalar(select(func.count()).select_from(Cluster)) or 0)


def _refused(r: Any) -> None:
    assert r.status_code == 422, r.text
    item = r.json()["detail"][0]
    assert item["loc"][-1] == "pools" and str(MAX_NODES_PER_CLUSTER) in item["msg"] and "1000000" in item["msg"]


def test_an_oversized_inventory_is_422_naming_the_pools_and_stores_nothing(
    client: TestClient, api_db: Database
) -> None:
    huge = _pools(10, MAX_NODES_PER_POOL)
    cluster = make_cluster(client, INVENTORY)
    before = _count(api_db)
    _refused(client.post("/v1/clusters", json={"name": name("c"), "inventory": huge}))
    _refused(
        client.post(
            "/v1/clusters/import/yaml",
            params={"name": name("y")},
            content=yaml.safe_dump(huge),
            headers={"Content-Type": "application/yaml"},
        )
    )
    _refused(client.put(f"/v1/clusters/{cluster['id']}/inventory", json={"inventory": huge}))
    assert _count(api_db) == before and ok(client.get(f"/v1/clusters/{cluster['id']}"))["revision"] == 1


def test_the_page_of_a_cluster_at_the_cap_summarises_pools_and_pages_its_nodes(client: TestClient) -> None:
    per_pool = MAX_NODES_PER_CLUSTER // 4
    drained = {f"p{i}-{n:05d}": "drained" for i in range(4) for n in range(0, per_pool, 100)}  # 1,000 in all
    inventory = {
        "pools": [
            {**p, "node_states": {k: v for k, v in drained.items() if k.startswith(f"{p['name']}-")}}
            for p in _pools(4, per_pool)["pools"]
        ]
    }
    cluster = make_cluster(client, inventory)
    html = ok_text(client.get(f"/clusters/{cluster['id']}"))
    assert len(re.findall(r'<tr class="node">', html)) == NODES_SHOWN
    assert f"Nodes 1&ndash;{NODES_SHOWN} of {MAX_NODES_PER_CLUSTER}" in html
    assert "<td>p0-00000</td><td><strong>drained</strong>" in html and f"?nodes_from={NODES_SHOWN}" in html
    assert "drained 250" in html  # the pool summary counts all of a pool's states
    assert html.count("</strong></li>") == NODES_SHOWN  # the not-healthy list stops at one page too
    last = ok_text(client.get(f"/clusters/{cluster['id']}", params={"nodes_from": MAX_NODES_PER_CLUSTER - 3}))
    rows = re.findall(r'<tr class="node"><td>(p\d)</td><td>([^<]+)</td>', last)
    assert rows == [("p3", "p3-24997"), ("p3", "p3-24998"), ("p3", "p3-24999")]
    assert "next</a>" not in last and "previous</a>" in last
    r = client.get(f"/clusters/{cluster['id']}", params={"nodes_from": MAX_NODES_PER_CLUSTER + 1})
    assert r.status_code == 422


def ok_text(resp: Any) -> str:
    assert resp.status_code == 200, resp.text[:500]
    return str(resp.text)
