"""Cluster inventory: YAML, presets, node states, custom GPUs, nvidia-smi topology import."""

from __future__ import annotations

import pytest

from optimizer.errors import DomainError, UnknownNameError
from optimizer.spec.cluster_loading import fabric_from_nvidia_smi_topo, load_cluster_preset, load_cluster_yaml
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.gpu_catalog import BUILTIN_GPUS, resolve_gpu

ISSUE_YAML = """
name: two-dgx-h100
pools:
  - name: dgx-h100
    gpu: H100-SXM-80GB
    nodes: 2
    gpus_per_node: 8
    intra_node: {kind: nvlink, gbytes_per_s: 450, domain_size: 8}
    inter_node: {nics_per_node: 8, gbits_per_s: 400}
"""


def test_issue_yaml_shape() -> None:
    c = load_cluster_yaml(ISSUE_YAML)
    assert c.healthy_gpus == 16
    assert c.fabric_of(c.pools[0]).gbytes_per_s == 450


def test_required_gpus_in_catalog() -> None:
    names = set(BUILTIN_GPUS)
    for want in (
        "A100-SXM-40GB",
        "A100-SXM-80GB",
        "A100-PCIe-40GB",
        "A100-PCIe-80GB",
        "H100-SXM-80GB",
        "H100-PCIe-80GB",
        "H800-SXM-80GB",
        "H200-SXM-141GB",
        "B200-180GB",
        "GB200-186GB",
        "L40S-48GB",
        "RTX-6000-Ada-48GB",
        "MI250X-GCD-64GB",
        "MI300X-192GB",
    ):
        assert want in names
    assert all(g.source for g in BUILTIN_GPUS.values())


def test_only_healthy_nodes_count() -> None:
    c = load_cluster_yaml(
        ISSUE_YAML.replace("    gpus_per_node: 8", "    gpus_per_node: 8\n    node_states: {dgx-h100-001: failed}")
    )
    assert c.healthy_gpus == 8


def test_unknown_node_in_states() -> None:
    with pytest.raises(DomainError) as exc:
        load_cluster_yaml(
            ISSUE_YAML.replace("    gpus_per_node: 8", "    gpus_per_node: 8\n    node_states: {nope: failed}")
        )
    assert "node_states" in exc.value.field


def test_unknown_gpu_lists_catalog() -> None:
    with pytest.raises(UnknownNameError) as exc:
        load_cluster_yaml(ISSUE_YAML.replace("H100-SXM-80GB", "H900"))
    assert "H100-SXM-80GB" in str(exc.value)


def test_user_defined_gpu() -> None:
    text = ISSUE_YAML.replace("H100-SXM-80GB", "MyChip") + (
        "gpu_types:\n  - {name: MyChip, bf16_tflops: 500, memory_gib: 96, memory_tbps: 4}\n"
    )
    c = load_cluster_yaml(text)
    assert c.gpu_of(c.pools[0]).bf16_tflops == 500


def test_alias_and_case() -> None:
    assert resolve_gpu("h100-sxm5-80gb").name == "H100-SXM-80GB"
    assert resolve_gpu("a100").name == "A100-SXM-80GB"


@pytest.mark.parametrize(
    ("spelling", "name"),
    [
        ("NVIDIA H100 80GB HBM3", "H100-SXM-80GB"),  # nvidia-smi
        ("NVIDIA A100-SXM4-40GB", "A100-SXM-40GB"),
        ("A100 80GB", "A100-SXM-80GB"),
        ("H100 SXM5 80GB", "H100-SXM-80GB"),
        ("H100 PCIe", "H100-PCIe-80GB"),
        ("AMD Instinct MI300X", "MI300X-192GB"),  # rocm-smi
        ("NVIDIA GH200 144GB HBM3e", "GH200-144GB"),
        ("GH200", "GH200-96GB"),
    ],
)
def test_spellings_from_papers_and_smi_tools(spelling: str, name: str) -> None:
    assert resolve_gpu(spelling).name == name


def test_an_unknown_gpu_still_lists_the_known_ones() -> None:
    with pytest.raises(UnknownNameError) as exc:
        resolve_gpu("NVIDIA P100-SXM2-16GB")
    assert "H100-SXM-80GB" in str(exc.value)


def test_preset_node_count() -> None:
    assert load_cluster_preset("dgx-h100:16").healthy_gpus == 128
    with pytest.raises(DomainError):
        load_cluster_preset("dgx-h100:zero")


def test_negative_nodes_rejected() -> None:
    with pytest.raises(DomainError) as exc:
        load_cluster_yaml(ISSUE_YAML.replace("nodes: 2", "nodes: -1"))
    assert "nodes" in exc.value.field


NVSWITCH_TOPO = """\
        GPU0    GPU1    GPU2    GPU3    GPU4    GPU5    GPU6    GPU7    NIC0    NIC1    CPU Affinity    NUMA Affinity
GPU0     X      NV18    NV18    NV18    NV18    NV18    NV18    NV18    PXB     SYS     0-55    0
GPU1    NV18     X      NV18    NV18    NV18    NV18    NV18    NV18    SYS     PXB     0-55    0
GPU2    NV18    NV18     X      NV18    NV18    NV18    NV18    NV18    SYS     SYS     0-55    0
GPU3    NV18    NV18    NV18     X      NV18    NV18    NV18    NV18    SYS     SYS     0-55    0
GPU4    NV18    NV18    NV18    NV18     X      NV18    NV18    NV18    SYS     SYS     56-111  1
GPU5    NV18    NV18    NV18    NV18    NV18     X      NV18    NV18    SYS     SYS     56-111  1
GPU6    NV18    NV18    NV18    NV18    NV18    NV18     X      NV18    SYS     SYS     56-111  1
GPU7    NV18    NV18    NV18    NV18    NV18    NV18    NV18     X      SYS     SYS     56-111  1
NIC0    PXB     SYS     SYS     SYS     SYS     SYS     SYS     SYS      X      SYS
NIC1    SYS     PXB     SYS     SYS     SYS     SYS     SYS     SYS     SYS      X

Legend:
  X    = Self
  NV#  = Connection traversing a bonded set of # NVLinks
"""

PCIE_TOPO = """\
        GPU0    GPU1    GPU2    GPU3    CPU Affinity    NUMA Affinity
GPU0     X      NV12    SYS     SYS     0-31    0
GPU1    NV12     X      SYS     SYS     0-31    0
GPU2    SYS     SYS      X      NV12    32-63   1
GPU3    SYS     SYS     NV12     X      32-63   1
"""

NO_NVLINK_TOPO = """\
        GPU0    GPU1    CPU Affinity
GPU0     X      PHB     0-31
GPU1    PHB      X      0-31
"""


def test_topo_nvswitch() -> None:
    n, fabric, nics = fabric_from_nvidia_smi_topo(NVSWITCH_TOPO)
    assert (n, fabric.kind, fabric.gbytes_per_s, fabric.domain_size, nics) == (8, "nvlink", 450, 8, 2)


def test_topo_nvlink_bridge_pairs() -> None:
    n, fabric, _ = fabric_from_nvidia_smi_topo(PCIE_TOPO)
    assert (n, fabric.kind, fabric.gbytes_per_s, fabric.domain_size) == (4, "nvlink", 300, 2)


def test_topo_pcie_only() -> None:
    n, fabric, _ = fabric_from_nvidia_smi_topo(NO_NVLINK_TOPO)
    assert (n, fabric.kind) == (2, "pcie")


def test_topo_garbage() -> None:
    with pytest.raises(DomainError):
        fabric_from_nvidia_smi_topo("hello world")
    # A header naming GPU0 without GPU columns, and more NVLinks than any GPU has, were 500s [issue 37 §2].
    with pytest.raises(DomainError, match="GPU columns"):
        fabric_from_nvidia_smi_topo('{"GPU0": "X"}')
    with pytest.raises(DomainError) as exc:
        fabric_from_nvidia_smi_topo("  GPU0 GPU1\nGPU0 X NV999999\nGPU1 NV999999 X\n")
    assert exc.value.field == "topology.gbytes_per_s"


def test_pool_size_is_capped_and_large_pools_are_counted_without_a_node_list() -> None:
    # A 10^6-node cluster was accepted and every listing rebuilt its node list (issue 16).
    from optimizer.errors import DomainError
    from optimizer.spec.cluster_loading import build_cluster
    from optimizer.spec.cluster_spec import MAX_NODES_PER_POOL

    with pytest.raises(DomainError) as exc:
        build_cluster(
            {"pools": [{"name": "p", "gpu": "H100-SXM-80GB", "gpus_per_node": 8, "nodes": MAX_NODES_PER_POOL + 1}]}
        )
    assert exc.value.field.endswith("nodes") and str(MAX_NODES_PER_POOL) in exc.value.rule
    big = build_cluster(
        {
            "pools": [
                {
                    "name": "p",
                    "gpu": "H100-SXM-80GB",
                    "nodes": MAX_NODES_PER_POOL,
                    "gpus_per_node": 8,
                    "node_states": {"p-00007": "failed", "p-99999": "drained", "p-00008": "healthy"},
                }
            ]
        }
    )
    pool = big.pools[0]
    assert "node_list" not in pool.__dict__  # validated and counted from the overrides alone
    assert pool.healthy_nodes == MAX_NODES_PER_POOL - 2 and big.healthy_gpus == 8 * (MAX_NODES_PER_POOL - 2)
    assert pool.node_name(7) == "p-00007"
    with pytest.raises(DomainError) as exc:
        build_cluster(
            {
                "pools": [
                    {
                        "name": "p",
                        "gpu": "H100-SXM-80GB",
                        "gpus_per_node": 8,
                        "nodes": 10,
                        "node_states": {"p-10": "failed"},
                    }
                ]
            }
        )
    assert "unknown node" in exc.value.rule


def test_inventory_diff_and_node_state_do_not_enumerate_counted_pools() -> None:
    """The diff of two inventories equals the node-by-node comparison, also when a counted pool's states are read
    from its overrides alone; a state change on a 100,000-node pool builds no node list [issue 16]."""
    import random

    from optimizer.spec.cluster_loading import build_cluster
    from optimizer.spec.inventory import InventoryDiff, diff_inventories, with_node_state

    def by_enumeration(before: ClusterSpec, after: ClusterSpec) -> tuple[list[str], ...]:
        old = {n.name: n.state for p in before.pools for n in p.node_list}
        new = {n.name: n.state for p in after.pools for n in p.node_list}
        changed = [n for n in sorted(set(old) & set(new)) if old[n] != new[n]]
        return (
            sorted(set(new) - set(old)),
            sorted(set(old) - set(new)),
            [n for n in changed if new[n] == "drained"],
            [n for n in changed if new[n] == "failed"],
            [n for n in changed if new[n] == "healthy"],
        )

    def lists(d: InventoryDiff) -> tuple[list[str], ...]:
        return d.added, d.removed, d.drained, d.failed, d.restored

    rng = random.Random(3)
    for _ in range(60):
        pools = []
        for name in ("a", "b"):
            n = rng.choice([3, 12, 120])
            states = {
                f"{name}-{i:03d}": rng.choice(["drained", "failed"]) for i in rng.sample(range(n), rng.randint(0, 3))
            }
            pools.append({"name": name, "gpu": "H100-SXM-80GB", "nodes": n, "gpus_per_node": 8, "node_states": states})
        before = build_cluster({"name": "c", "pools": pools})
        after = before
        for _ in range(rng.randint(1, 4)):
            pool = rng.choice(after.pools)
            node = pool.node_name(rng.randrange(pool.node_count))
            after = with_node_state(after, node, rng.choice(["healthy", "drained", "failed"]))
        if rng.random() < 0.3:  # a pool grows: its node list is compared the long way
            doc = after.model_dump(mode="json")
            doc["pools"][1]["nodes"] += 2
            after = build_cluster(doc)
        assert lists(diff_inventories(before, after)) == by_enumeration(before, after)

    big = build_cluster(
        {"name": "big", "pools": [{"name": "p", "gpu": "H100-SXM-80GB", "nodes": 100_000, "gpus_per_node": 8}]}
    )
    after = with_node_state(big, "p-04242", "failed")
    d = diff_inventories(big, after)
    assert d.failed == ["p-04242"] and after.healthy_gpus == big.healthy_gpus - 8
    assert "node_list" not in big.pools[0].__dict__ and "node_list" not in after.pools[0].__dict__  # never built
