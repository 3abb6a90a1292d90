"""Slurm inventories: node states and flags, GRES and features to catalog GPUs, hostlists, topology.conf (tree and
block), the JSON shapes of 22.05 (captured from Debian's slurmctld) and 23.02+ (data_parser), and bad input."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from optimizer.errors import DomainError
from optimizer.spec.cluster_loading import build_cluster
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.scheduler_inventory.hostlist import expand_hostlist
from optimizer.spec.scheduler_inventory.inventory_document import cluster_document
from optimizer.spec.scheduler_inventory.records import SchedulerReportedError
from optimizer.spec.scheduler_inventory.slurm import gpu_gres, node_state, slurm_inventory
from optimizer.spec.scheduler_inventory.topology_conf import parse_topology

DATA = Path(__file__).parent / "scheduler_data"


def read(name: str) -> str:
    return (DATA / name).read_text()


def cluster(nodes: str, topology: str | None = None) -> ClusterSpec:
    topo = parse_topology(read(topology)) if topology else None
    return build_cluster(cluster_document(slurm_inventory(read(nodes), topo), "c").document)


def states(c: ClusterSpec) -> dict[str, str]:
    return {n.name: n.state for p in c.pools for n in p.node_list}


@pytest.mark.parametrize(
    ("slurm", "expected"),
    [
        (["IDLE"], "healthy"),
        (["MIXED"], "healthy"),
        (["IDLE", "CLOUD", "POWERED_DOWN"], "healthy"),  # a powered-down cloud node resumes on demand
        (["IDLE", "DRAIN"], "drained"),  # drained: Slurm reports the base state idle with a DRAIN flag
        (["ALLOCATED", "DRAIN"], "drained"),  # draining
        (["IDLE", "MAINTENANCE", "RESERVED"], "drained"),
        (["IDLE", "REBOOT_ISSUED"], "drained"),
        (["DOWN"], "failed"),
        (["DOWN", "DRAIN"], "failed"),  # down and drained: down wins
        (["IDLE", "FAIL"], "failed"),
        (["MIXED", "FAIL"], "failed"),  # failing
        (["IDLE", "NOT_RESPONDING"], "failed"),
        (["IDLE", "DRAIN", "INVALID_REG"], "failed"),  # slurmd registered fewer GPUs than configured
        (["UNKNOWN"], "failed"),
        (["idle", "drain"], "drained"),  # 22.05 spells the base state in lower case
    ],
)
def test_a_node_is_healthy_only_when_no_state_or_flag_says_otherwise(slurm: list[str], expected: str) -> None:
    assert node_state(slurm) == expected


def test_the_22_05_capture_maps_every_state_slurmctld_set() -> None:
    """sinfo --json of Debian's slurmctld 22.05 after scontrol drained, downed, failed, unresponded and reserved
    for maintenance nodes, and a slurmd registered four of eight GPUs (tests/slurm_cluster.py)."""
    c = cluster("sinfo-22.05.json", "scontrol-show-topology-22.05.txt")
    s = states(c)
    assert {k for k, v in s.items() if v == "drained"} == {"gpu03", "gpu09"}  # DRAIN, MAINTENANCE
    assert {k for k, v in s.items() if v == "failed"} == {"gpu01", "gpu05", "gpu07", "gpu11"}  # INVALID_REG...
    assert len(s) == 16 and "cpu01" not in s  # the CPU nodes are left out
    (pool,) = c.pools
    assert pool.gpu == "H100-SXM-80GB" and pool.gpus_per_node == 8 and pool.pod_size == 8
    assert {n.name: n.switches for n in pool.node_list}["gpu09"] == ["leaf2", "spine"]


def test_a_drained_node_is_unhealthy_whatever_its_base_state_says() -> None:
    doc = json.loads(read("sinfo-22.05.json"))
    gpu03 = next(n for n in doc["nodes"] if n["name"] == "gpu03")
    assert gpu03["state"] == "idle" and "DRAIN" in gpu03["state_flags"]  # as slurmctld printed it
    assert states(cluster("sinfo-22.05.json"))["gpu03"] == "drained"


def test_sinfo_of_23_02_and_later_groups_nodes_per_partition_and_nvml_gres_types_resolve() -> None:
    inv = slurm_inventory(read("sinfo-24.11.json"), parse_topology(read("topology-tree-3level.conf")))
    assert inv.source == "Slurm sinfo --json (data_parser/v0.0.42)"
    assert len(inv.nodes) == 16  # h100-001 and -002 are in two partitions: once each
    assert {n.gpu for n in inv.nodes} == {"H100-SXM-80GB"}  # gpu:nvidia_h100_80gb_hbm3:4(S:0),...:4(S:1)
    assert {n.gpus for n in inv.nodes} == {8}
    by = {n.name: n for n in inv.nodes}
    assert by["h100-005"].state == "drained" and by["h100-012"].state == "drained"  # drained, draining
    assert by["h100-016"].state == "failed" and "NOT_RESPONDING" in by["h100-016"].why
    assert by["h100-016"].switches == ["leaf04", "spine02", "core"]
    assert inv.ignored == {"without GPUs": ["login-01", "login-02"]}


def test_three_switch_levels_map_to_pod_size_and_the_note_says_what_the_model_keeps() -> None:
    imported = cluster_document(
        slurm_inventory(read("sinfo-24.11.json"), parse_topology(read("topology-tree-3level.conf"))), "east"
    )
    assert imported.document["pools"][0]["pod_size"] == 4
    note = next(n for n in imported.notes if "switch level" in n)
    assert "3 switch level(s); 4 leaf switch(es) of 4 nodes -> pod_size 4" in note
    assert "level 3 stay on the nodes only" in note


def test_gb200_blocks_are_nvlink_domains_and_untyped_gres_take_the_type_from_features() -> None:
    c = cluster("scontrol-nodes-24.11.json", "topology-block-nvl72.conf")
    (pool,) = c.pools
    assert pool.gpu == "GB200-186GB" and pool.gpus_per_node == 4 and pool.node_count == 36  # r2-t18: gpu:4 + gb200
    assert c.fabric_of(pool).domain_size == 72  # 18 trays x 4 GPUs per block
    nodes = {n.name: n for n in pool.node_list}
    assert nodes["gb200-r2-t18"].nvlink_domain == "nvl72-rack2" and nodes["gb200-r1-t01"].switches == []
    assert (nodes["gb200-r1-t04"].state, nodes["gb200-r2-t09"].state, nodes["gb200-r2-t17"].state) == (
        "drained",
        "failed",
        "drained",
    )


def test_blocks_of_gpus_whose_nvlink_stays_in_a_node_are_leaf_switches() -> None:
    topo = parse_topology("BlockName=b1 Nodes=gpu[01-08]\nBlockName=b2 Nodes=gpu[09-16]\nBlockName=b3 Nodes=cpu[01-02]")
    imported = cluster_document(slurm_inventory(read("sinfo-22.05.json"), topo), "c")
    c = build_cluster(imported.document)
    assert c.pools[0].pod_size == 8 and c.pools[0].node_list[0].switches == ["b1"]
    assert c.pools[0].node_list[0].nvlink_domain is None
    assert any("Slurm blocks are read as leaf switches" in n for n in imported.notes)


@pytest.mark.parametrize(
    ("gres", "expected"),
    [
        ("gpu:h100:8", {"h100": 8}),
        ("gpu:h100:8(S:0-1)", {"h100": 8}),
        ("gpu:nvidia_h100_80gb_hbm3:4(S:0),gpu:nvidia_h100_80gb_hbm3:4(S:1)", {"nvidia_h100_80gb_hbm3": 8}),
        ("gpu:8", {None: 8}),
        ("gpu:a100:4,gpu:h100:4", {"a100": 4, "h100": 4}),
        ("shard:h100:32,gpu:h100:8,mps:400", {"h100": 8}),
        ("gpu:h100:0", {}),
        ("(null)", {}),
        ("", {}),
    ],
)
def test_gres_strings(gres: str, expected: dict[str | None, int]) -> None:
    assert gpu_gres(gres, "gres") == expected


def test_hostlists_expand_as_slurm_does() -> None:
    assert expand_hostlist("gpu[01-03,10],login1") == ["gpu01", "gpu02", "gpu03", "gpu10", "login1"]
    assert expand_hostlist("r[1-2]-n[8-9]") == ["r1-n8", "r1-n9", "r2-n8", "r2-n9"]
    assert expand_hostlist("n[098-101]") == ["n098", "n099", "n100", "n101"]
    for bad, rule in (("gpu[01-", "unmatched '['"), ("gpu[3-1]", "backwards"), ("gpu[a-b]", "bad range")):
        with pytest.raises(DomainError, match=re.escape(rule)):
            expand_hostlist(bad)


def test_scontrol_show_topology_reads_as_topology_conf_does() -> None:
    conf = parse_topology("SwitchName=leaf1 Nodes=gpu[01-08]\nSwitchName=leaf2 Nodes=gpu[09-16]\n"
                          "SwitchName=leaf3 Nodes=cpu[01-02]\nSwitchName=spine Switches=leaf[1-3]")  # fmt: skip
    shown = parse_topology(read("scontrol-show-topology-22.05.txt"))  # upper switches list every node below
    assert shown.switches_of == conf.switches_of and shown.plugin == "tree"


def _sinfo(*nodes: dict[str, object]) -> str:
    return json.dumps({"nodes": [{"state": ["IDLE"], "gres": "gpu:h100:8", **n} for n in nodes], "errors": []})


@pytest.mark.parametrize(
    ("nodes", "topology", "message"),
    [
        ("{not json", None, "nodes: sinfo --json is not valid JSON: Expecting property name"),
        ('{"meta": {}}', None, "has no `nodes` or `sinfo` list"),
        (_sinfo({"name": "a"}, {"name": "a"}), None, "duplicate node name a"),
        (
            _sinfo({"name": "a", "gres": "gpu:tpu9:8", "features": ["ib"]}),
            None,
            "nodes.a.gres: unknown GPU type in node a: GRES 'gpu:tpu9:8', features 'ib'; known: A10-24GB, A100-PCIe",
        ),
        (_sinfo({"name": "a", "gres": "gpu:8"}), None, "unknown GPU type in node a: GRES 'gpu:8'; known:"),
        (_sinfo({"name": "a", "gres": "gpu:a100:4,gpu:h100:4"}), None, "names several GPU types; a node holds one"),
        (_sinfo({"name": "a"}), "SwitchName=s1 Nodes=a,b[1-2]", "topology: names nodes the inventory lacks: b1, b2"),
        (_sinfo({"name": "a"}), "SwitchName=s1 Nodes=a\nSwitchName=s1 Nodes=a", "line 2: switch 's1' is named twice"),
        (_sinfo({"name": "a"}), "SwitchName=s1 Nodes=a\nSwitchName=s2 Nodes=a", "line 2: node a is below both s1"),
        (_sinfo({"name": "a"}), "SwitchName=s1 Switches=s9", "switch s1 names unknown switch 's9'"),
        (_sinfo({"name": "a"}), "Nodes=a", "line 1: expected SwitchName= or BlockName="),
        (_sinfo({"name": "a"}), "SwitchName=s1 Nodes=a[1-", "unmatched '['"),
        (_sinfo({"name": "a"}), "SwitchName=s1 Nodes=a\nBlockName=b Nodes=a", "mixes SwitchName (tree) and BlockName"),
    ],
)
def test_bad_input_is_one_line_naming_the_field(nodes: str, topology: str | None, message: str) -> None:
    with pytest.raises(DomainError) as err:
        inv = slurm_inventory(nodes, parse_topology(topology) if topology is not None else None)
        cluster_document(inv, "c")
    assert message in str(err.value) and "\n" not in str(err.value)


def test_an_unreachable_controller_is_not_an_empty_cluster() -> None:
    """sinfo --json exits 0 and prints `errors` with no nodes when slurmctld does not answer (seen on 22.05)."""
    text = '{"meta": {}, "errors": [{"error": "Unspecified error", "errno": -1}], "nodes": []}'
    with pytest.raises(SchedulerReportedError, match="printed an error instead of nodes: Unspecified error"):
        slurm_inventory(text)


def test_no_gpu_nodes_at_all_is_an_error() -> None:
    inv = slurm_inventory(_sinfo({"name": "cpu1", "gres": ""}))
    with pytest.raises(DomainError, match=r"no GPU nodes in Slurm node list \(unknown version\) \(1 ignored\)"):
        cluster_document(inv, "c")
