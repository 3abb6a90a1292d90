"""Kubernetes inventories from `kubectl get nodes -o json`: GPU Feature Discovery labels, the GB200 NVL72 clique,
Topograph and Kueue topology labels, cordons and readiness, and bad input."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from optimizer.errors import DomainError
from optimizer.spec.cluster_loading import build_cluster
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.scheduler_inventory.inventory_document import cluster_document
from optimizer.spec.scheduler_inventory.kubernetes import KubernetesLabels, kubernetes_inventory

FIXTURE = json.loads((Path(__file__).parent / "scheduler_data" / "kubectl-nodes.json").read_text())


def nodes(change: Any = None) -> dict[str, Any]:
    """The fixture (a v1 List of Nodes), changed by `change(items)`."""
    doc = copy.deepcopy(FIXTURE)
    if change is not None:
        change(doc["items"])
    return doc


def build(doc: dict[str, Any], labels: KubernetesLabels | None = None) -> ClusterSpec:
    return build_cluster(cluster_document(kubernetes_inventory(json.dumps(doc), labels), "k").document)


def item(items: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(i for i in items if i["metadata"]["name"] == name)


def test_gfd_labels_give_pools_states_switches_and_the_nvl72_domain() -> None:
    c = build(nodes())
    h100, gb200 = c.pools
    assert (h100.gpu, h100.gpus_per_node, h100.node_count) == ("H100-SXM-80GB", 8, 8)  # NVIDIA-H100-80GB-HBM3
    assert (gb200.gpu, gb200.gpus_per_node, gb200.node_count) == ("GB200-186GB", 4, 36)  # NVIDIA-GB200
    state = {n.name: n.state for p in c.pools for n in p.node_list}
    assert state["dgx-h100-03"] == "drained"  # spec.unschedulable (cordoned)
    assert state["dgx-h100-06"] == "failed"  # Ready=Unknown (the kubelet stopped posting)
    assert state["gb200-r2-t05"] == "drained" and sum(s == "healthy" for s in state.values()) == 41
    assert "cp-1" not in state  # the control plane has no GPU
    tray = {n.name: n for n in gb200.node_list}["gb200-r1-t07"]
    assert tray.nvlink_domain == "7b968a6d-c8aa-45e1-9e07-e1e51be99c31.1"  # nvidia.com/gpu.clique
    assert tray.switches == ["gb-leaf-1", "gb-spine-1"]  # fabric.topograph.run/tier-0, tier-1
    assert c.fabric_of(gb200).domain_size == 72 and c.fabric_of(h100).domain_size == 8
    assert h100.pod_size == 4 and gb200.pod_size == 18


def test_the_accelerator_label_stands_in_for_the_clique_and_is_ignored_where_nvlink_stays_in_a_node() -> None:
    def edit(items: list[dict[str, Any]]) -> None:
        for i in items:
            i["metadata"]["labels"].pop("nvidia.com/gpu.clique", None)
            if i["metadata"]["name"].startswith("dgx"):  # e.g. an AWS capacity block, not an NVLink domain
                i["metadata"]["labels"]["accelerator.topograph.run/domain"] = "cb-1"

    imported = cluster_document(kubernetes_inventory(json.dumps(nodes(edit))), "k")
    c = build_cluster(imported.document)
    assert {n.nvlink_domain for n in c.pools[1].node_list} == {"nvl72-1", "nvl72-2"}
    assert {n.nvlink_domain for n in c.pools[0].node_list} == {None}
    assert any("accelerator.topograph.run/domain on H100-SXM-80GB ignored on 8 node(s)" in n for n in imported.notes)


def test_kueue_topology_labels_are_read_when_named() -> None:
    def edit(items: list[dict[str, Any]]) -> None:
        for n, i in enumerate(items):
            lab = i["metadata"]["labels"]
            for k in [k for k in lab if k.startswith("fabric.topograph.run/")]:
                del lab[k]
            lab["cloud.provider.com/topology-block"] = f"block-{n // 20}"
            lab["cloud.provider.com/topology-rack"] = f"rack-{n // 5}"

    levels = ["cloud.provider.com/topology-rack", "cloud.provider.com/topology-block", "kubernetes.io/hostname"]
    c = build(nodes(edit), KubernetesLabels(fabric=levels))
    node = {n.name: n for n in c.pools[0].node_list}["dgx-h100-01"]  # item 1
    assert node.switches == ["rack-0", "block-0"]  # the host level is the node itself, not a switch
    assert build(nodes(edit)).pools[0].node_list[0].switches == []  # not named: no topology read


def test_topograph_s_earlier_leaf_spine_core_labels() -> None:
    def edit(items: list[dict[str, Any]]) -> None:
        for i in items:
            lab = i["metadata"]["labels"]
            for tier, key in (("0", "leaf"), ("1", "spine")):
                if f"fabric.topograph.run/tier-{tier}" in lab:
                    lab[f"network.topology.nvidia.com/{key}"] = lab.pop(f"fabric.topograph.run/tier-{tier}")

    assert build(nodes(edit)).pools[0].node_list[0].switches == ["leaf-1", "spine-1"]


def test_time_sliced_products_are_the_physical_gpu_and_mig_slices_are_left_out() -> None:
    def edit(items: list[dict[str, Any]]) -> None:
        item(items, "dgx-h100-01")["metadata"]["labels"]["nvidia.com/gpu.product"] = "NVIDIA-H100-80GB-HBM3-SHARED"
        lab = item(items, "dgx-h100-02")["metadata"]["labels"]
        lab["nvidia.com/gpu.product"], lab["nvidia.com/gpu.count"] = "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb", "56"

    imported = cluster_document(kubernetes_inventory(json.dumps(nodes(edit))), "k")
    names = [n["name"] for n in imported.document["pools"][0]["nodes"]]
    assert "dgx-h100-01" in names and "dgx-h100-02" not in names
    assert any("1 node(s) with MIG-partitioned GPUs ignored, e.g. dgx-h100-02" in n for n in imported.notes)


def test_gfd_memory_picks_the_catalog_variant() -> None:
    def edit(items: list[dict[str, Any]]) -> None:
        lab = item(items, "dgx-h100-01")["metadata"]["labels"]
        lab["nvidia.com/gpu.product"], lab["nvidia.com/gpu.memory"] = "NVIDIA-A100-SXM4", "40960"

    inv = kubernetes_inventory(json.dumps(nodes(edit)))
    assert {n.name: n.gpu for n in inv.nodes}["dgx-h100-01"] == "A100-SXM-40GB"


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda items: item(items, "dgx-h100-04")["metadata"]["labels"].update(
                {"nvidia.com/gpu.product": "NVIDIA-H999"}
            ),
            "nodes.dgx-h100-04.labels.nvidia.com/gpu.product: unknown GPU type in node dgx-h100-04: label "
            "nvidia.com/gpu.product=NVIDIA-H999 (81559 MiB); known: A10-24GB",
        ),
        (lambda items: items.append(copy.deepcopy(items[1])), "duplicate node name dgx-h100-01"),
        (
            lambda items: item(items, "dgx-h100-04")["metadata"]["labels"].pop("nvidia.com/gpu.product"),
            "8 nvidia.com/gpu but no nvidia.com/gpu.product label",
        ),
        (
            lambda items: item(items, "dgx-h100-04")["metadata"]["labels"].update({"nvidia.com/gpu.count": "eight"}),
            "labels.nvidia.com/gpu.count: must be a whole number (got 'eight')",
        ),
        (lambda items: items[0].pop("metadata"), "items[0].metadata.name: every Node needs a name"),
    ],
)
def test_bad_input_is_one_line_naming_the_field(edit: Any, message: str) -> None:
    with pytest.raises(DomainError) as err:
        build(nodes(edit))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_malformed_json_and_shapes() -> None:
    with pytest.raises(DomainError, match="nodes: k is not valid JSON"):
        kubernetes_inventory("[", source="k")
    with pytest.raises(DomainError, match="has no `items` list"):
        kubernetes_inventory('{"kind": "List"}')
    single = kubernetes_inventory(json.dumps(FIXTURE["items"][1]))  # one Node object
    assert [n.name for n in single.nodes] == ["dgx-h100-01"]
