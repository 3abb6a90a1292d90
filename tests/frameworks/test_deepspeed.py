"""The DeepSpeed export goes through DeepSpeed's own config class, and what DeepSpeed parsed is what was priced.

Pinned: DeepSpeed 0.19.8 from PyPI (tests/frameworks/deepspeed/requirements.txt, with torch 2.13.0 CPU; a plain
`pip install`: the sdist builds without torch and without any CUDA / C++ op), the newest release; and DeepSpeed 0.19.6
(tests/frameworks/deepspeed_0_19_6), the last release with MiCS, for plans that state it. Built by
`.venv/bin/python tests/frameworks/install.py deepspeed deepspeed_0_19_6` (`make frameworks`). check.py feeds the
exported JSON to deepspeed.runtime.config.DeepSpeedConfig with the plan's world size (a one-process gloo group and a
model-parallel unit answering dp = world / (tp x pp): only the distributed runtime is stood in) and runs
deepspeed.checkpointing.configure on it; a config DeepSpeed refuses comes back as harness.Rejected.

Plans come from the planner for framework deepspeed (no pins, pinned ZeRO stages 0-3, PP, AutoTP, hpZ, MiCS) and from
hand-built configurations; the priced side is read from the plan and its estimate (the ZeRO-3 gathered weights: the
stage's transient memory at ZeRO-3 less the same configuration's at ZeRO-2)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from optimizer.costmodel.estimate import estimate
from optimizer.errors import DomainError
from optimizer.exports.launch import export
from optimizer.search.planner import plan
from optimizer.search.space import SearchSpace, parse_pins
from optimizer.spec.cluster_loading import load_cluster_preset
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import TrainingWorkload
from tests.frameworks.harness import Rejected, check

GB = 1e9
BF16_BYTES = 2
ZERO3 = ["zero=3", "tp=1", "pp=1", "mbs=1", "recompute=full"]
# (model, cluster, global batch, pins): the planner's picks for framework deepspeed
PLANS = [
    ("llama-3-8b", "dgx-h100:1", 64, []),
    ("llama-3-8b", "dgx-h100:4", 64, []),
    ("llama-3-70b", "dgx-h100:8", 512, []),
    ("llama-3-8b", "dgx-h100:1", 64, ["zero=0"]),
    ("llama-3-8b", "dgx-h100:1", 64, ["zero=0", "pp=2"]),
    ("llama-3-8b", "dgx-h100:1", 64, ["zero=1", "pp=1"]),
    ("llama-3-8b", "dgx-h100:1", 64, ["zero=2"]),
    ("llama-3-8b", "dgx-h100:1", 64, ["zero=3"]),
    ("llama-3-70b", "dgx-h100:4", 256, ["zero=3", "recompute=full"]),
    ("llama-3-8b", "dgx-h100:1", 64, ["tp=2", "pp=1", "sp=false"]),
    ("llama-3-8b", "dgx-h100:4", 64, [*ZERO3, "dp=32", "shard_scope=weights"]),
]


def _workload(gbs: int, version: str | None = None, precision: str = "bf16") -> TrainingWorkload:
    return TrainingWorkload(
        global_batch_size=gbs, seq_len=4096, framework="deepspeed", framework_version=version, precision=precision
    )


def _planned(model: str, cluster: str, gbs: int, pins: list[str], version: str | None = None) -> ParallelConfig:
    w = _workload(gbs, version)
    result = plan(
        load_model_preset(model), load_cluster_preset(cluster), w, SearchSpace(pins=parse_pins(pins)), top_k=1
    )
    assert result.plan is not None, result.status
    return result.plan.config


def _parsed(
    model: ModelSpec, w: TrainingWorkload, c: ParallelConfig, env: str = "deepspeed"
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the exported JSON, what DeepSpeed parsed from it on the plan's world)."""
    doc = json.loads(export("deepspeed", model, w, c).content)
    return doc, check(env, {"config": doc, "world_size": c.gpus, "tp": c.tp, "pp": c.pp})


def _zero3_live_params(model: ModelSpec, cluster: ClusterSpec, w: TrainingWorkload, c: ParallelConfig) -> float:
    """The unsharded parameters the estimate prices as gathered at once under ZeRO-3 (per GPU)."""
    plain = c.model_copy(update={"shard_group": None, "shard_scope": "states"})  # hpZ's copy is in the weights
    three = estimate(model, cluster, w, plain).stages[0].memory_gb.transient
    two = estimate(model, cluster, w, plain.model_copy(update={"zero_stage": 2})).stages[0].memory_gb.transient
    return (three - two) * GB / BF16_BYTES


def assert_as_priced(model: ModelSpec, cluster: ClusterSpec, w: TrainingWorkload, c: ParallelConfig) -> None:
    """Field by field, DeepSpeed's parse of the export against the plan."""
    _, got = _parsed(model, w, c)
    autotp = c.tp if c.tp > 1 and c.pp == 1 and not c.sequence_parallel else 0
    expected = {
        "world_size": c.dp,  # DeepSpeed's data-parallel size = world / (tp x pp)
        "train_batch_size": w.global_batch_size,
        "train_micro_batch_size_per_gpu": c.mbs,
        "gradient_accumulation_steps": w.global_batch_size // (c.dp * c.mbs),
        "zero_stage": c.zero_stage,
        "overlap_comm": c.overlap_grad_reduce,
        "offload_optimizer": None,  # the plan prices no optimizer or parameter offload
        "offload_param": None,
        "mics_shard_size": None,
        "zero_hpz_partition_size": c.shard_group if c.shard_scope == "weights" and c.shard_group else 1,
        # DeepSpeed's default (the model dtype): BF16_Optimizer under PP at ZeRO 0, as priced (engine.py
        # _do_optimizer_sanity_check; costmodel/framework_runtime.py DEEPSPEED.bf16_optimizer_under_pp)
        "grad_accum_dtype": None,
        "bf16": w.precision in ("bf16", "fp8"),
        "fp16": w.precision == "fp16",
        "autotp_size": autotp,  # AutoTP without PP / SP; Megatron-DeepSpeed's TP otherwise
        "activation_checkpointing": c.recompute != "none",
        # priced: each layer's input whole on every TP rank (2sbh, / tp only with SP): no partition, no CPU copy
        "partition_activations": False,
        "cpu_checkpointing": False,
    }
    assert {k: got[k] for k in expected} == expected
    assert got["contiguous_gradients"] and got["reduce_scatter"]  # DeepSpeed's defaults, which the plan assumes
    if c.zero_stage == 3:
        live = _zero3_live_params(model, cluster, w, c)
        assert got["stage3_max_live_parameters"] <= live * 1.01
        ahead = got["stage3_prefetch_bucket_size"] + got["stage3_max_reuse_distance"]
        assert ahead <= got["stage3_max_live_parameters"]


@pytest.mark.parametrize(
    ("model", "cluster", "gbs", "pins"), PLANS, ids=[f"{m}-{c}-{'-'.join(p)}" for m, c, _, p in PLANS]
)
def test_planned_exports_parse_as_priced(model: str, cluster: str, gbs: int, pins: list[str]) -> None:
    c = _planned(model, cluster, gbs, pins)
    assert c.shard_group is None or c.shard_scope == "weights"  # MiCS plans: the tests below
    assert_as_priced(load_model_preset(model), load_cluster_preset(cluster), _workload(gbs), c)


HAND_BUILT = [
    ("llama-3-8b", "dgx-h100:1", ParallelConfig(dp=8, zero_stage=3)),
    ("mixtral-8x7b", "dgx-h100:4", ParallelConfig(dp=32, ep=8, zero_stage=1, recompute="full")),
    ("llama-3-8b", "dgx-h100:1", ParallelConfig(dp=8, zero_stage=2, recompute="full")),
    ("llama-3-8b", "dgx-h100:1", ParallelConfig(tp=2, dp=4, zero_stage=1, recompute="full", mbs=2)),
    ("llama-3-8b", "dgx-h100:1", ParallelConfig(tp=2, dp=4, zero_stage=3, recompute="selective")),
    ("llama-3-70b", "dgx-h100:8", ParallelConfig(tp=8, pp=1, dp=8, zero_stage=3, recompute="full", mbs=2)),
    ("llama-3-70b", "dgx-h100:8", ParallelConfig(dp=64, zero_stage=3, recompute="full")),
    ("llama-3-70b", "dgx-h100:8", ParallelConfig(tp=4, pp=4, dp=4, zero_stage=1, sequence_parallel=True)),
]


@pytest.mark.parametrize(("model", "cluster", "c"), HAND_BUILT)
def test_hand_built_exports_parse_as_priced(model: str, cluster: str, c: ParallelConfig) -> None:
    assert_as_priced(load_model_preset(model), load_cluster_preset(cluster), _workload(512), c)


def test_fp16_plans_parse_as_fp16() -> None:
    c = ParallelConfig(dp=8, zero_stage=1)
    m, cl = load_model_preset("llama-3-8b"), load_cluster_preset("dgx-h100:1")
    assert_as_priced(m, cl, _workload(64, precision="fp16"), c)


def test_mics_plans_are_refused_for_a_deepspeed_without_mics() -> None:
    planned = _planned("llama-3-8b", "dgx-h100:4", 64, ZERO3)
    assert planned.shard_scope != "states" or planned.shard_group is None  # the planner picks no MiCS for 0.19.8
    c = _planned("llama-3-8b", "dgx-h100:4", 64, ZERO3, version="0.19.6")  # MiCS, planned for a release with it
    assert (c.shard_group, c.shard_scope) == (8, "states")
    with pytest.raises(DomainError) as exc:
        export("deepspeed", load_model_preset("llama-3-8b"), _workload(64), c)
    assert exc.value.field == "export.shard_group"
    # what 0.19.8 itself says of the key the export used to write
    doc = {"train_batch_size": 64, "train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3}}
    doc["zero_optimization"]["mics_shard_size"] = 8  # type: ignore[index]
    with pytest.raises(Rejected, match="MiCS ZeRO-3 sharding has been removed"):
        check("deepspeed", {"config": doc, "world_size": 32})


def test_mics_plans_for_0_19_6_parse_there_as_priced() -> None:
    c = _planned("llama-3-8b", "dgx-h100:4", 64, ZERO3, version="0.19.6")
    assert (c.shard_group, c.shard_scope) == (8, "states")
    _, got = _parsed(load_model_preset("llama-3-8b"), _workload(64, "0.19.6"), c, env="deepspeed_0_19_6")
    assert got["deepspeed"] == "0.19.6"
    assert (got["zero_stage"], got["mics_shard_size"], got["world_size"]) == (3, 8, 32)
    assert (got["train_batch_size"], got["gradient_accumulation_steps"], got["zero_hpz_partition_size"]) == (64, 2, 1)


def test_a_batch_deepspeed_cannot_split_is_refused_at_export() -> None:
    with pytest.raises(DomainError) as exc:
        export("deepspeed", load_model_preset("llama-3-8b"), _workload(60), ParallelConfig(dp=8))
    assert exc.value.field == "export.global_batch_size"
    # DeepSpeed's own batch assertion, on the same numbers
    doc = {"train_batch_size": 60, "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 7}
    with pytest.raises(Rejected, match="Check batch related parameters"):
        check("deepspeed", {"config": doc, "world_size": 8})
