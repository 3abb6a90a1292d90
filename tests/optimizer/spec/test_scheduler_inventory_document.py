"""From a scheduler's nodes to an inventory: what carries over from the previous revision, how switch levels map
to the pool's tiers (and what the notes say when they cannot), and the diff of nodes moved in the fabric."""

from __future__ import annotations

from optimizer.spec.cluster_loading import build_cluster
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.inventory import diff_inventories
from optimizer.spec.scheduler_inventory.inventory_document import ImportDefaults, cluster_document
from optimizer.spec.scheduler_inventory.records import ScheduledNode, SchedulerInventory


def node(name: str, leaf: str | None = None, gpu: str = "H100-SXM-80GB", gpus: int = 8, **kw: object) -> ScheduledNode:
    return ScheduledNode.model_validate(
        {"name": name, "gpu": gpu, "gpus": gpus, "state": "healthy", "switches": [leaf, "spine"] if leaf else [], **kw}
    )


def inventory(*nodes: ScheduledNode) -> SchedulerInventory:
    return SchedulerInventory(source="test", nodes=list(nodes))


def test_pool_settings_the_scheduler_does_not_know_carry_over_from_the_previous_revision() -> None:
    base = build_cluster(
        {
            "name": "lab",
            "pools": [
                {"name": "east", "gpu": "H100", "gpus_per_node": 8, "price_per_gpu_hour": 2.5, "oversubscription": 2,
                 "inter_node": {"nics_per_node": 4, "gbits_per_s": 200}, "nodes": [{"name": "n1"}, {"name": "n2"}]},
                {"name": "west", "gpu": "H100", "gpus_per_node": 8, "nodes": [{"name": "n3"}]},
            ],
        }
    )  # fmt: skip
    imported = cluster_document(
        inventory(node("n1", "l1"), node("n2", "l1"), node("n3", "l2"), node("n4", "l2")), "lab", base
    )
    c = build_cluster(imported.document)
    east, west = c.pools
    assert (east.name, east.gpu, east.price_per_gpu_hour, east.oversubscription) == ("east", "H100", 2.5, 2.0)
    assert east.inter_node.nics_per_node == 4 and [n.name for n in east.node_list] == ["n1", "n2", "n4"]
    assert [n.name for n in west.node_list] == ["n3"]  # the pool that held a node keeps it
    assert any("east: 3 nodes x 8 H100-SXM-80GB (3 healthy); NICs as before" in n for n in imported.notes)


def test_new_pools_take_the_nic_defaults_and_say_so() -> None:
    imported = cluster_document(
        inventory(node("a"), node("b", gpu="L40S-48GB", gpus=4)), "c", None, ImportDefaults(nic_gbps=200)
    )
    c = build_cluster(imported.document)
    assert [(p.name, p.inter_node.nics_per_node, p.inter_node.gbits_per_s) for p in c.pools] == [
        ("h100-sxm-80gb", 8, 200.0),
        ("l40s-48gb", 4, 200.0),
    ]
    assert any("NICs assumed 4 x 200 Gb/s" in n for n in imported.notes)


def test_leaf_switches_of_unequal_size_leave_pod_size_unset_and_say_why() -> None:
    imported = cluster_document(inventory(*(node(f"n{i}", "l1" if i < 4 else "l2") for i in range(6))), "c")
    assert "pod_size" not in imported.document["pools"][0]
    assert any("leaf switches hold 2, 4 nodes, not one size: pod_size unset" in n for n in imported.notes)
    some = cluster_document(inventory(node("a", "l1"), node("b")), "c")
    assert any("1 of 2 nodes have no switch" in n for n in some.notes)


def test_nvlink_domains_of_unequal_size_keep_the_catalog_domain() -> None:
    trays = [node(f"t{i}", gpu="GB200-186GB", gpus=4, domain=f"r{i // 10}", domain_source="x") for i in range(18)]
    imported = cluster_document(inventory(*trays), "c")  # 10 + 8 trays
    c = build_cluster(imported.document)
    assert c.fabric_of(c.pools[0]).domain_size == 72 and "intra_node" not in imported.document["pools"][0]
    assert any("NVLink domains hold 8, 10 nodes, not one size" in n for n in imported.notes)


def test_nodes_moved_to_other_switches_are_in_the_diff() -> None:
    def spec(swapped: bool) -> ClusterSpec:
        leaves = {"a": "l1", "b": "l2" if swapped else "l1", "c": "l1" if swapped else "l2", "d": "l2"}
        return build_cluster(cluster_document(inventory(*(node(n, leaf) for n, leaf in leaves.items())), "c").document)

    d = diff_inventories(spec(False), spec(True))
    assert d.other == ["node b switches", "node c switches"] and not d.empty
    assert diff_inventories(spec(False), spec(False)).empty
