"""A cluster's size is capped as a whole, and its nodes are read a page at a time [issue 37 §3]."""

from __future__ import annotations

from typing import Any

import pytest

from optimizer.errors import DomainError
from optimizer.spec.cluster_loading import build_cluster
from optimizer.spec.cluster_spec import MAX_NODES_PER_CLUSTER, MAX_NODES_PER_POOL


def _pools(count: int, nodes: int, **extra: Any) -> dict[str, Any]:
    pool = {"gpu": "H100-SXM-80GB", "gpus_per_node": 8, "nodes": nodes, **extra}
    return {"pools": [{**pool, "name": f"p{i}"} for i in range(count)]}


def test_a_cluster_of_more_nodes_than_any_real_one_is_refused_naming_the_pools() -> None:
    assert MAX_NODES_PER_POOL * 10 > MAX_NODES_PER_CLUSTER  # the 10 x 100,000 passed the pool cap alone
    with pytest.raises(DomainError) as exc:
        build_cluster(_pools(10, MAX_NODES_PER_POOL))
    assert exc.value.field == "cluster.pools"
    assert "1000000 nodes" in exc.value.rule and str(MAX_NODES_PER_CLUSTER) in exc.value.rule
    at_cap = build_cluster(_pools(4, MAX_NODES_PER_CLUSTER // 4))
    assert at_cap.node_count == MAX_NODES_PER_CLUSTER
    with pytest.raises(DomainError, match=r"cluster\.pools"):
        build_cluster(_pools(4, MAX_NODES_PER_CLUSTER // 4 + 1))


def test_a_page_of_nodes_crosses_pools_without_building_node_lists() -> None:
    spec = build_cluster(
        {
            "pools": [
                {**p, "node_states": {f"{p['name']}-005": "drained"}} if p["name"] == "p1" else p
                for p in _pools(3, 1000)["pools"]
            ]
        }
    )
    page = spec.nodes_page(998, 5)
    assert [(pool, n.name, n.state) for pool, n in page] == [
        ("p0", "p0-998", "healthy"),
        ("p0", "p0-999", "healthy"),
        ("p1", "p1-000", "healthy"),
        ("p1", "p1-001", "healthy"),
        ("p1", "p1-002", "healthy"),
    ]
    assert spec.nodes_page(1005, 1)[0][1].state == "drained"
    assert spec.nodes_page(2998, 10) == spec.nodes_page(2998, 2) and spec.nodes_page(3000, 10) == []
    assert [(pool, n.name) for pool, n in spec.unhealthy_nodes(10)] == [("p1", "p1-005")]
    assert all("node_list" not in p.__dict__ for p in spec.pools)


def test_listed_nodes_page_with_their_states() -> None:
    nodes = [{"name": f"n{i}", "state": "failed" if i % 2 else "healthy"} for i in range(6)]
    spec = build_cluster({"pools": [{"name": "a", "gpu": "H100-SXM-80GB", "gpus_per_node": 8, "nodes": nodes}]})
    assert [n.name for _, n in spec.nodes_page(2, 3)] == ["n2", "n3", "n4"]
    assert [n.name for _, n in spec.unhealthy_nodes(2)] == ["n1", "n3"]
