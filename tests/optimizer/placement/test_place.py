"""Placement: TP groups stay in one NVLink domain, drained nodes get no rank, pipeline neighbours share a leaf where
the inventory allows; where it does not, the placement says so and the estimate prices what it gives."""

from __future__ import annotations

from pathlib import Path

import yaml

from optimizer.costmodel.estimate import estimate
from optimizer.placement.place import place
from optimizer.placement.priced import placed_estimate
from optimizer.spec.cluster_loading import build_cluster, load_cluster_preset, load_cluster_yaml
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import TrainingWorkload
from tests.optimizer.placement.helpers import LAST_RACK, ONE_PER_RACK, nvl_racks

ROOT = Path(__file__).resolve().parents[3]
LLAMA70 = load_model_preset("llama-3-70b")
W = TrainingWorkload(global_batch_size=480, seq_len=8192)
# 8-GPU TP groups over two trays, 15 replicas per stage, two stages: 240 GPUs, every healthy tray of the cluster.
TP8 = ParallelConfig(tp=8, pp=2, dp=15, sequence_parallel=True)


def hetero() -> object:
    return build_cluster(yaml.safe_load((ROOT / "examples" / "hetero-cluster.yaml").read_text()))


def test_tp_groups_stay_in_one_nvlink_domain_when_the_racks_allow() -> None:
    out = place(nvl_racks(LAST_RACK), TP8)
    p = out.placement
    assert len(p.tp_domains) == 30 and all(" + " not in d for d in p.tp_domains)
    assert {h.name for h in p.hosts}.isdisjoint(LAST_RACK) and not p.degraded and out.fabric is None
    # each TP group's two trays share the domain the placement names for it
    by_rank = {r: h for h in p.hosts for r in range(h.first_rank, h.first_rank + h.ranks)}
    for g, domain in enumerate(p.tp_domains):
        assert {by_rank[r].nvlink_domain for r in range(8 * g, 8 * g + 8)} == {domain}


def test_drained_nodes_get_no_rank_and_ranks_follow_the_host_order() -> None:
    cluster = hetero()  # h100-003 drained
    cfg = ParallelConfig(tp=8, pp=2, dp=7, stage_pools=["h100", "h100"])
    p = place(cluster, cfg).placement
    assert "h100-003" not in {h.name for h in p.hosts} and len(p.hosts) == 14
    ranks = p.rank_hosts()
    assert len(ranks) == 112 and [h for h, _ in ranks[::8]] == [h.name for h in p.hosts]
    assert all(local == r % 8 for r, (_, local) in enumerate(ranks)) and p.uniform() == 8


def test_a_fragmented_cluster_splits_tp_groups_says_so_and_is_priced_slower() -> None:
    frag, whole = nvl_racks(ONE_PER_RACK), nvl_racks(LAST_RACK)
    p = place(frag, TP8).placement
    split = [d for d in p.tp_domains if " + " in d]
    assert len(split) == 2 and all(d.count(" + ") == 1 for d in split)
    assert any(d.startswith("TP groups") and "split across NVLink domains" in d for d in p.degraded)
    slow, fast = placed_estimate(LLAMA70, frag, W, TP8), placed_estimate(LLAMA70, whole, W, TP8)
    assert slow.repriced and not fast.repriced
    assert slow.estimate.step_time_s > 1.1 * fast.estimate.step_time_s
    assert slow.estimate.breakdown.tp_comm > fast.estimate.breakdown.tp_comm
    assert any(n.startswith("Placement: TP groups") for n in slow.estimate.notes)


def test_an_unfragmented_placement_prices_exactly_what_the_cost_model_does() -> None:
    for cluster, cfg, gbs in (
        (nvl_racks(LAST_RACK), TP8, 480),
        (load_cluster_preset("dgx-h100:16"), ParallelConfig(tp=8, pp=4, dp=4, vp=5, schedule="interleaved-1f1b"), 512),
    ):
        w = W.model_copy(update={"global_batch_size": gbs})
        pe, plain = placed_estimate(LLAMA70, cluster, w, cfg), estimate(LLAMA70, cluster, w, cfg)
        assert not pe.repriced and pe.estimate.step_time_s == plain.step_time_s
        assert pe.estimate.model_dump() == plain.model_dump()


def test_pipeline_neighbours_share_a_leaf_and_a_spine_crossing_for_lack_of_healthy_nodes_is_priced() -> None:
    cluster = hetero()  # pods of 8 nodes, 2:1 between them; pod 0 has 7 healthy nodes
    two = place(cluster, ParallelConfig(tp=8, pp=2, dp=4, stage_pools=["h100"] * 2)).placement
    assert [h.same_leaf for h in two.hops] == [True] and not two.degraded
    # 12 nodes need two leaves on the whole inventory too: the cost model's own (validated) idealisation stands
    three = place(cluster, ParallelConfig(tp=8, pp=3, dp=4, stage_pools=["h100"] * 3))
    assert [(h.same_leaf, h.tier) for h in three.placement.hops] == [(True, "network"), (False, "inter-pod")]
    assert not three.placement.degraded and three.fabric is None
    # one node down in each pod: 7 + 7 healthy, so two 4-node stages no longer share a leaf
    doc = yaml.safe_load((ROOT / "examples" / "hetero-cluster.yaml").read_text())
    doc["pools"][0]["node_states"] = {"h100-003": "drained", "h100-012": "failed"}
    broken = place(build_cluster(doc), ParallelConfig(tp=8, pp=2, dp=4, stage_pools=["h100"] * 2))
    assert [h.tier for h in broken.placement.hops] == ["inter-pod"]
    assert any("cross the spine" in d for d in broken.placement.degraded)
    assert broken.fabric is not None and all(f is not None and f.pp is not None for f in broken.fabric)
    assert broken.fabric[0] is not None and broken.fabric[0].pp is not None
    assert broken.fabric[0].pp.name == "inter-pod"


def test_a_stage_straddling_two_leaves_prices_its_dp_groups_over_the_spine() -> None:
    # pod 0 has 7 healthy nodes, pod 1 only 6: an 8-node stage must straddle the two leaves
    doc = yaml.safe_load((ROOT / "examples" / "hetero-cluster.yaml").read_text())
    doc["pools"][0]["node_states"] = {"h100-003": "drained", "h100-009": "failed", "h100-010": "failed"}
    cluster = build_cluster(doc)
    cfg = ParallelConfig(tp=8, dp=8, stage_pools=["h100"])
    out = place(cluster, cfg)
    assert {h.leaf for h in out.placement.hosts} == {"h100/pod-0", "h100/pod-1"}
    assert any(d.startswith("DP groups of stage 0") and "the spine" in d for d in out.placement.degraded)
    assert out.fabric is not None and out.fabric[0] is not None and out.fabric[0].dp is not None
    w = TrainingWorkload(global_batch_size=512, seq_len=4096)
    assert placed_estimate(LLAMA70, cluster, w, cfg).estimate.breakdown.dp_comm > 0


def test_the_inventory_s_own_switches_and_nvlink_domains_decide() -> None:
    nodes = [
        {"name": f"gpu{i:02d}", "switches": [f"leaf-{i // 4}", "spine"], "nvlink_domain": f"rack-{i // 2}"}
        for i in range(8)
    ]
    nodes[2]["state"] = "drained"  # rack-1 keeps one tray: a TP group over two trays cannot sit there whole
    cluster = nvl_racks(nodes=nodes, intra_node={"kind": "nvlink", "gbytes_per_s": 900, "domain_size": 8})
    p = place(cluster, ParallelConfig(tp=8, dp=3)).placement
    assert {h.nvlink_domain for h in p.hosts} <= {"rack-0", "rack-2", "rack-3"}
    assert set(p.tp_domains) == {"rack-0", "rack-2", "rack-3"} and not p.degraded
    assert {h.leaf for h in p.hosts} == {"leaf-0", "leaf-1"}


def test_stages_smaller_than_a_node_share_it_in_rank_order() -> None:
    cluster = load_cluster_preset("dgx-h100:2")
    p = place(cluster, ParallelConfig(tp=2, pp=4, dp=2)).placement
    assert [h.ranks for h in p.hosts] == [8, 8] and p.hosts[0].stages == [0, 1] and p.hosts[1].stages == [2, 3]
    assert [h.same_leaf for h in p.hops] == [True] * 3 and [h.tier for h in p.hops] == ["nvlink", "network", "nvlink"]


def test_the_fragmented_example_splits_one_tp_group_over_the_spine_only_when_every_tray_is_needed() -> None:
    cluster = load_cluster_yaml((ROOT / "examples" / "fragmented-gb200.yaml").read_text())
    all_trays = place(cluster, ParallelConfig(tp=8, dp=15)).placement
    assert [d for d in all_trays.tp_domains if " + " in d] == ["rack-0 + rack-1"]
    assert any("over the spine" in d for d in all_trays.degraded)
    two_stages = place(cluster, ParallelConfig(tp=8, dp=7, pp=2)).placement
    assert set(two_stages.tp_domains) == {"rack-0", "rack-1"} and not two_stages.degraded
    assert [h.leaf for h in two_stages.hosts[::14]] == ["leaf-0", "leaf-1"]
