"""A sharding group smaller than the data-parallel group (ParallelConfig.shard_group): the spec's rules, each
naming its field, and what each framework runs."""

from __future__ import annotations

import pytest

from optimizer.costmodel.estimate import estimate
from optimizer.errors import DomainError
from optimizer.frameworks.capabilities import framework, runs_shard_group, unsupported_knob
from optimizer.spec.cluster_loading import load_cluster_preset
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import InferenceWorkload, TrainingWorkload

LLAMA8B = load_model_preset("llama-3-8b")
MIXTRAL = load_model_preset("mixtral-8x7b")
FOUR_NODES = load_cluster_preset("dgx-h100:4")


def err(cfg: ParallelConfig, framework_name: str = "megatron", model: ModelSpec = LLAMA8B) -> DomainError:
    w = TrainingWorkload(global_batch_size=64, seq_len=4096, framework=framework_name)
    with pytest.raises(DomainError) as exc:
        estimate(model, FOUR_NODES, w, cfg)
    return exc.value


def test_a_group_of_all_dp_replicas_is_todays_behaviour() -> None:
    assert ParallelConfig(dp=8, shard_group=8, zero_stage=1).shard_group is None
    assert ParallelConfig(dp=8, shard_group=8, shard_scope="weights", zero_stage=3).shard_scope == "states"
    c = ParallelConfig(dp=8, shard_group=2, zero_stage=1)
    assert (c.shard_group, c.state_replicas, c.secondary_shard_ranks) == (2, 4, None)
    hpz = ParallelConfig(dp=8, cp=2, shard_group=4, shard_scope="weights", zero_stage=3)
    assert (hpz.state_replicas, hpz.secondary_shard_ranks) == (1, 8)


@pytest.mark.parametrize(
    ("cfg", "field", "rule"),
    [
        (ParallelConfig(tp=2, dp=16, zero_stage=1, shard_group=3), "config.shard_group", "must divide dp=16"),
        (ParallelConfig(tp=2, dp=16, zero_stage=0, shard_group=4), "config.shard_group", "needs zero_stage >= 1"),
        (ParallelConfig(tp=2, dp=16, zero_stage=1, shard_scope="weights"), "config.shard_scope", "needs a shard_group"),
        (
            ParallelConfig(dp=32, zero_stage=2, shard_group=8, shard_scope="weights"),
            "config.shard_scope",
            "needs zero_stage 3",
        ),
    ],
)
def test_spec_rules_name_the_field(cfg: ParallelConfig, field: str, rule: str) -> None:
    e = err(cfg, "deepspeed")
    assert e.field == field and rule in e.rule


def test_replicas_must_split_the_expert_data_parallel_group() -> None:
    # Mixtral, 8 experts on ep 8 over tp 1 x dp 16: expert dp 2; 16 / 2 = 8 replicas cannot split it
    # (Megatron parallel_state.py asserts expert_data_parallel_size % instances == 0).
    e = err(ParallelConfig(dp=16, ep=8, zero_stage=1, shard_group=2), model=MIXTRAL)
    assert e.field == "config.shard_group" and "expert data-parallel group" in e.rule
    assert unsupported_knob(framework("megatron"), ParallelConfig(dp=16, ep=8, zero_stage=1, shard_group=8)) is None


def test_serving_refuses_a_shard_group() -> None:
    cfg = ParallelConfig(tp=8, dp=2, shard_group=1)
    with pytest.raises(DomainError) as exc:
        estimate(LLAMA8B, FOUR_NODES, InferenceWorkload(prompt_len=512, output_len=64, batch=4), cfg)
    assert exc.value.field == "config.shard_group"


@pytest.mark.parametrize(
    ("name", "cfg", "knob"),
    [
        # DeepSpeed: MiCS and hpZ at ZeRO-3 only, and over world ranks (tp = pp = ep = 1)
        ("deepspeed", ParallelConfig(dp=32, zero_stage=1, shard_group=8), "shard_group"),
        ("deepspeed", ParallelConfig(tp=2, dp=16, zero_stage=3, shard_group=8), "shard_group"),
        ("deepspeed", ParallelConfig(tp=2, dp=16, zero_stage=3, shard_group=8, shard_scope="weights"), "shard_scope"),
        # hpZ is DeepSpeed's alone
        ("megatron", ParallelConfig(dp=32, zero_stage=3, shard_group=8, shard_scope="weights"), "shard_scope"),
        ("torchtitan", ParallelConfig(dp=32, zero_stage=3, shard_group=8, shard_scope="weights"), "shard_scope"),
    ],
)
def test_frameworks_refuse_what_they_cannot_run_naming_the_knob(name: str, cfg: ParallelConfig, knob: str) -> None:
    e = err(cfg, name)
    assert e.field == f"config.{knob}" and f"not available in {name}" in e.rule


@pytest.mark.parametrize(
    ("name", "cfg"),
    [
        ("torchtitan", ParallelConfig(tp=2, dp=16, zero_stage=3, shard_group=4)),
        ("torchtitan", ParallelConfig(tp=2, pp=2, dp=8, zero_stage=1, shard_group=4, layers_per_stage=[16, 16])),
        ("megatron", ParallelConfig(tp=2, pp=2, dp=8, zero_stage=1, shard_group=4, layers_per_stage=[16, 16])),
        ("megatron", ParallelConfig(tp=2, dp=16, zero_stage=3, shard_group=4)),
        ("deepspeed", ParallelConfig(dp=32, zero_stage=3, shard_group=8)),
        ("deepspeed", ParallelConfig(dp=32, zero_stage=3, shard_group=8, shard_scope="weights")),
    ],
)
def test_frameworks_run_their_sharding_groups(name: str, cfg: ParallelConfig) -> None:
    w = TrainingWorkload(global_batch_size=64, seq_len=4096, framework=name)
    assert estimate(LLAMA8B, FOUR_NODES, w, cfg).step_time_s > 0


def test_runs_shard_group_matches_the_table() -> None:
    ds, mlm, titan = framework("deepspeed"), framework("megatron"), framework("torchtitan")
    assert runs_shard_group(ds, 3, "weights", False) and not runs_shard_group(ds, 3, "weights", True)
    assert not runs_shard_group(ds, 1, "states", False)
    assert runs_shard_group(mlm, 1, "states", True) and not runs_shard_group(mlm, 3, "weights", False)
    assert runs_shard_group(titan, 2, "states", True) and not runs_shard_group(titan, 0, "states", False)
