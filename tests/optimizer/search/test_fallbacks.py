"""Fallback plans (optimizer/search/fallbacks.py): the loss scenarios on an inventory with leaf switches and NVLink
domains, the checkpoint-compatible fallback (same shards, the global batch kept), a faster reshaped one with what
resharding the checkpoint takes, and the match a re-plan starts from."""

from __future__ import annotations

from pathlib import Path

import pytest

from optimizer.placement.place import place
from optimizer.search.fallbacks import (
    CHECKPOINT_BYTES_PER_PARAM,
    CONVERSION_GBYTES_PER_S,
    fallbacks,
    lost_nodes,
    match,
    reshard_note,
    scenarios,
    without_nodes,
)
from optimizer.search.reported import reported_plan
from optimizer.spec.cluster_loading import load_cluster_preset, load_cluster_yaml
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import TrainingWorkload

ROOT = Path(__file__).resolve().parents[3]
GB200 = load_cluster_yaml((ROOT / "examples" / "fragmented-gb200.yaml").read_text())


def test_scenarios_on_racks_lose_a_node_two_nodes_a_domain_and_a_leaf() -> None:
    # 112 GPUs: every healthy tray of both racks (15 + 15 trays of 4 GPUs, one drained tray in each rack).
    cfg = ParallelConfig(tp=4, pp=1, dp=28, mbs=1)
    placement = place(GB200, cfg).placement
    found = {sc.kind: sc for sc in scenarios(GB200, placement)}
    assert set(found) == {"node", "two_nodes", "nvlink_domain", "leaf_switch"}  # one pool: no whole-pool loss
    used = [h.name for h in placement.hosts]
    assert found["node"].lost == (used[-1],) and found["two_nodes"].lost == tuple(used[-2:])
    rack = found["nvlink_domain"].lost
    assert len(rack) == 15 and len({n[:2] for n in rack}) == 1  # one rack's healthy trays: r0-* or r1-*
    assert "r0-tray03" not in rack and "r1-tray09" not in rack  # the drained trays are not lost twice
    assert set(found["leaf_switch"].lost) == set(rack)  # a rack is under one leaf here
    for sc in found.values():
        assert sc.cluster.healthy_gpus == GB200.healthy_gpus - 4 * len(sc.lost)
        states = {n.name: n.state for n in sc.cluster.pools[0].node_list}
        assert all(states[n] == "failed" for n in sc.lost)
    assert lost_nodes(GB200, found["two_nodes"].cluster) == {"gb200": set(used[-2:])}


def test_a_mixed_cluster_also_loses_each_pool_it_runs_on() -> None:
    cluster = load_cluster_yaml(
        """
name: mixed
pools:
  - {name: h100, gpu: H100-SXM-80GB, nodes: 4, gpus_per_node: 8}
  - {name: a100, gpu: A100-SXM-80GB, nodes: 4, gpus_per_node: 8}
"""
    )
    cfg = ParallelConfig(tp=8, pp=2, dp=2, stage_pools=["h100", "a100"])
    kinds = [(sc.kind, sc.pool) for sc in scenarios(cluster, place(cluster, cfg).placement)]
    assert ("pool", "h100") in kinds and ("pool", "a100") in kinds
    assert ("node", "h100") in kinds and ("node", "a100") in kinds


def test_the_compatible_fallback_keeps_the_shards_and_the_global_batch_and_a_faster_reshaped_one_says_how() -> None:
    cluster = load_cluster_preset("dgx-h100:4")
    model = load_model_preset("llama-3-8b")
    w = TrainingWorkload(global_batch_size=64, seq_len=4096)
    running = ParallelConfig(tp=8, pp=1, dp=4, mbs=1)
    result = reported_plan(model, cluster, w, running)
    found = fallbacks(model, cluster, w, result)
    one = [f for f in found if f.scenario == "node"]
    compat = next(f for f in one if f.checkpoint_compatible)
    assert compat.config is not None and (compat.config.tp, compat.config.pp) == (8, 1)
    # dp 3 does not split 64 sequences: the largest dp that does, with more micro-batches for the same batch
    assert compat.config.dp == 2 and compat.gpus == 16
    assert compat.config.dp * compat.config.mbs * 32 == w.global_batch_size  # 32 micro-batches per step
    assert "dp 4→2" in compat.diff and "micro-batches 16→32" in compat.diff
    assert compat.reshard.startswith("loads as is") and compat.reshard_cost_s == 0.0
    reshaped = next(f for f in one if not f.checkpoint_compatible)
    assert reshaped.step_time_s is not None and compat.step_time_s is not None
    assert reshaped.step_time_s < compat.step_time_s and reshaped.preferred and not compat.preferred
    assert reshaped.config is not None and reshaped.config.tp != 8
    assert "Megatron torch_dist" in reshaped.reshard and "distrib_optimizer.py" in reshaped.reshard
    assert all(f.lost_nodes == ["dgx-h100-003"] and f.healthy_gpus == {"dgx-h100": 24} for f in one)
    assert all(f.compute_time_s >= 0 and f.searched for f in one)
    # each fallback's goodput is priced on the inventory after the loss: below its raw token rate, and the faster
    # reshaped plan also yields more useful tokens per second
    for f in (compat, reshaped):
        assert f.goodput_tokens_per_s is not None and f.tokens_per_s is not None
        assert 0 < f.goodput_tokens_per_s < f.tokens_per_s
    assert reshaped.goodput_tokens_per_s > compat.goodput_tokens_per_s  # type: ignore[operator]


def test_reshard_notes_by_framework() -> None:
    model = load_model_preset("llama-3-70b")
    running = ParallelConfig(tp=8, pp=4, dp=8, zero_stage=1)
    fewer = running.model_copy(update={"dp": 7})
    other = running.model_copy(update={"tp": 4, "pp": 8})
    assert reshard_note("megatron", model, running, fewer)[0]
    ok, note, cost = reshard_note("megatron", model, running, other)
    assert not ok and "--dist-ckpt-optim-fully-reshardable" in note and cost == 0.0
    ok, note, cost = reshard_note("torchtitan", model, running, other)
    assert not ok and "reshards on load" in note and cost == 0.0
    # DeepSpeed ZeRO shards the optimizer by dp: even fewer replicas need the universal checkpoint, offline.
    ok, note, cost = reshard_note("deepspeed", model, running, fewer)
    gb = model.num_parameters * CHECKPOINT_BYTES_PER_PARAM / 1e9
    assert not ok and "ds_to_universal" in note and cost == pytest.approx(2 * gb / CONVERSION_GBYTES_PER_S)
    no_zero = running.model_copy(update={"zero_stage": 0})
    assert reshard_note("deepspeed", model, no_zero, no_zero.model_copy(update={"dp": 7}))[0]


def test_a_replan_matches_the_fallback_of_the_same_nodes_or_the_same_gpu_counts() -> None:
    cluster = load_cluster_preset("dgx-h100:4")
    model = load_model_preset("llama-3-8b")
    w = TrainingWorkload(global_batch_size=64, seq_len=4096)
    result = reported_plan(model, cluster, w, ParallelConfig(tp=8, pp=1, dp=4, mbs=1))
    found = fallbacks(model, cluster, w, result)
    healthy = {"dgx-h100": 24}
    hit = match(found, {"dgx-h100": {"dgx-h100-003"}}, healthy)
    assert hit is not None and hit[1] == "nodes" and hit[0].preferred and hit[0].scenario == "node"
    other = without_nodes(cluster, {"dgx-h100": ["dgx-h100-000"]})  # another node: the same GPUs are left
    hit = match(found, lost_nodes(cluster, other), healthy)
    assert hit is not None and hit[1] == "gpu_counts" and hit[0].scenario == "node"
    assert match(found, {}, {"dgx-h100": 32}) is None  # nothing lost
    assert match(found, {"dgx-h100": {"a", "b", "c"}}, {"dgx-h100": 8}) is None  # no scenario lost three


def test_without_time_for_searches_only_the_compatible_fallbacks_are_listed() -> None:
    cluster = load_cluster_preset("dgx-h100:4")
    model = load_model_preset("llama-3-8b")
    w = TrainingWorkload(global_batch_size=64, seq_len=4096)
    result = reported_plan(model, cluster, w, ParallelConfig(tp=8, pp=1, dp=4, mbs=1))
    found = fallbacks(model, cluster, w, result, budget_s=0.0)
    assert found and all(not f.searched and f.checkpoint_compatible for f in found if f.config is not None)
    assert {f.scenario for f in found} == {"node", "two_nodes"}  # a node is its own NVLink domain; one leaf
    assert all(f.preferred for f in found)  # one entry per scenario, the compatible one
