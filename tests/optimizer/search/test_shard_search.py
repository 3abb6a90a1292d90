"""The planner chooses a sharding group where the framework runs one: the node-size group beside the whole
data-parallel group, the values a pin names, the same optimum as the exhaustive oracle."""

from __future__ import annotations

import pytest

from optimizer.errors import DomainError
from optimizer.search.candidates import TrainingSpace
from optimizer.search.planner import plan
from optimizer.search.space import SearchSpace, parse_pins
from optimizer.spec.cluster_loading import load_cluster_preset
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.workload import TrainingWorkload
from tests.optimizer.search.test_planner import check_against_oracle, small_cluster, tiny_model

LLAMA8B = load_model_preset("llama-3-8b")
FOUR_NODES = load_cluster_preset("dgx-h100:4")
DS_ZERO3 = ["zero=3", "tp=1", "pp=1", "mbs=1", "recompute=full"]


def _plan(framework: str, pins: list[str], version: str | None = None) -> object:
    w = TrainingWorkload(global_batch_size=64, seq_len=4096, framework=framework, framework_version=version)
    result = plan(LLAMA8B, FOUR_NODES, w, SearchSpace(pins=parse_pins(pins)), top_k=1, time_limit_s=30)
    assert result.status == "OPTIMAL" and result.plan is not None
    return result.plan.config


def test_deepspeed_zero3_across_nodes_picks_mics_inside_a_node() -> None:
    # ZeRO-3 over 32 ranks sends every rank's gathers through its own NIC; MiCS inside the node keeps them on NVLink
    # (in a DeepSpeed that has it: 0.19.6; 0.19.7 removed it, and the release a plan names none of is 0.19.8,
    # where ZeRO++ hpZ keeps the backward's gathers inside the node instead)
    cfg = _plan("deepspeed", DS_ZERO3, "0.19.6")
    assert (cfg.dp, cfg.shard_group, cfg.shard_scope) == (32, 8, "states")  # type: ignore[attr-defined]
    newest = _plan("deepspeed", DS_ZERO3)
    assert (newest.dp, newest.shard_group, newest.shard_scope) == (32, 8, "weights")  # type: ignore[attr-defined]


def test_pins_name_the_group_and_the_scope() -> None:
    hpz = _plan("deepspeed", [*DS_ZERO3, "dp=32", "shard_scope=weights"])
    assert (hpz.shard_group, hpz.shard_scope) == (8, "weights")  # type: ignore[attr-defined]
    four = _plan("deepspeed", [*DS_ZERO3, "dp=32", "shard_group=4"])
    assert four.shard_group == 4  # type: ignore[attr-defined]
    whole = _plan("deepspeed", [*DS_ZERO3, "dp=32", "shard_group=32"])
    assert whole.shard_group is None  # type: ignore[attr-defined]


def test_bad_shard_pins_name_the_pin() -> None:
    for pins, field in ((["shard_group=0"], "pin.shard_group"), (["shard_scope=all"], "pin.shard_scope")):
        with pytest.raises(DomainError) as exc:
            parse_pins(pins)
        assert exc.value.field == field
    w = TrainingWorkload(global_batch_size=64, seq_len=4096, framework="megatron")
    with pytest.raises(DomainError) as exc:
        plan(LLAMA8B, FOUR_NODES, w, SearchSpace(pins=parse_pins(["shard_scope=weights"])), time_limit_s=5)
    assert exc.value.field == "pin.shard_scope" and "not available in megatron" in exc.value.rule


def test_the_space_offers_the_node_size_group_only_where_dp_leaves_the_node() -> None:
    w = TrainingWorkload(global_batch_size=64, seq_len=4096, framework="torchtitan")
    space = SearchSpace(pins=parse_pins(["zero=3", "tp=2", "pp=1", "mbs=1", "recompute=full", "cp=1"]))
    seen = {(c.config.dp, c.config.shard_group) for c in TrainingSpace(LLAMA8B, FOUR_NODES, w, space).all_candidates()}
    assert (16, 4) in seen and (16, None) in seen and (8, 4) in seen  # 4 dp replicas x tp 2 fill a node
    assert not any(s for d, s in seen if d <= 4)  # dp inside one node: the whole group is the node's


@pytest.mark.parametrize("framework", ["torchtitan", "deepspeed", "megatron"])
def test_equals_the_oracle_with_sharding_groups(framework: str) -> None:
    cluster = small_cluster(3.0, nodes=2, gpn=4)
    w = TrainingWorkload(global_batch_size=16, seq_len=1024, framework=framework)
    space = SearchSpace(pins=parse_pins(["mbs=1,2", "vp<=2", "cp=1"]))
    ts = TrainingSpace(tiny_model(), cluster, w, space)
    assert any(c.config.shard_group for c in ts.all_candidates())  # the space holds sharding groups
    check_against_oracle(tiny_model(), cluster, w, space)
