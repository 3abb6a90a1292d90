"""A listed pool counts its healthy nodes as its node list gives their states (the listing's own state, overridden
by node_states), without building the list: a submission's check counts them (issue 49: 4.5 s for 100,000 nodes)."""

from __future__ import annotations

from optimizer.spec.cluster_spec import NodePool


def test_listed_healthy_nodes_agree_with_the_node_list_without_building_it() -> None:
    nodes = [{"name": f"n{i}", "state": "failed" if i % 3 == 0 else "healthy"} for i in range(30)]
    pool = NodePool.model_validate(
        {
            "name": "p",
            "gpu": "H100-SXM-80GB",
            "gpus_per_node": 8,
            "nodes": nodes,
            "node_states": {"n0": "healthy", "n1": "drained", "n2": "failed"},
        }
    )
    assert pool.healthy_nodes == 30 - 10 + 1 - 2
    assert "node_list" not in pool.__dict__  # counted from the listing, no copy of every node
    assert pool.healthy_nodes == sum(1 for n in pool.node_list if n.state == "healthy")
    assert pool.healthy_gpus == 19 * 8
