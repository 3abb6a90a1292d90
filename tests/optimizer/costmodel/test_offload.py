"""Activation offloading to host memory (Megatron --cpu-offloading-num-layers, Transformer Engine's CPU offload):
memory, the copies over the host link, the rules Megatron enforces, the pin and the export."""

from __future__ import annotations

import pytest

from optimizer.costmodel.estimate import estimate
from optimizer.errors import DomainError
from optimizer.exports.launch import export
from optimizer.search.planner import plan
from optimizer.search.space import SearchSpace, parse_pins
from optimizer.spec.cluster_loading import resolve_cluster
from optimizer.spec.model_loading import resolve_model
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import TrainingWorkload

# Megatron-Bridge's Llama 3 70B FP8 recipe for 64 GB200 (perf_recipes/llama/gb200/llama3.py
# llama3_70b_pretrain_64gpu_gb200_fp8cs_config: Megatron-FSDP over 64, mbs 2, cpu_offloading_num_layers 40);
# docs/performance-summary-archive.md, 25.11 container, DGX-GB200: 4,312 tokens/s per GPU.
W70 = TrainingWorkload(global_batch_size=256, seq_len=8192, precision="fp8", grad_dtype="bf16", fp8_param_gather=True)
FSDP64 = ParallelConfig(dp=64, zero_stage=3, mbs=2)


def test_offloaded_layers_leave_the_gpu_and_cost_only_what_the_link_cannot_hide() -> None:
    model = resolve_model("llama-3-70b")
    gb200 = resolve_cluster("gb200-nvl72:16")
    base = estimate(model, gb200, W70, FSDP64)
    off = estimate(model, gb200, W70, FSDP64.model_copy(update={"offload_layers": 40}))
    # (the embedding output stays on the GPU)
    assert off.stages[0].memory_gb.activations == pytest.approx(base.stages[0].memory_gb.activations / 2, rel=0.01)
    assert off.breakdown.offload == 0.0  # NVLink-C2C at 450 GB/s hides the copies under the passes
    # PCIe Gen5 (64 GB/s at 80%) on H100 cannot hide 40 layers' activations of an 8B model's pass
    small, h100 = resolve_model("llama-3-8b"), resolve_cluster("dgx-h100:1")
    w8 = TrainingWorkload(global_batch_size=64, seq_len=8192)
    cfg = ParallelConfig(dp=8, zero_stage=3, mbs=4, offload_layers=30)
    assert estimate(small, h100, w8, cfg).breakdown.offload > 0


def test_the_gb200_recipe_is_priced_near_its_published_rate() -> None:
    model = resolve_model("llama-3-70b")
    e = estimate(model, resolve_cluster("gb200-nvl72:16"), W70, FSDP64.model_copy(update={"offload_layers": 40}))
    per_gpu = W70.tokens_per_step / e.step_time_s / 64
    assert per_gpu == pytest.approx(4312, rel=0.10)


@pytest.mark.parametrize(
    ("update", "words"),
    [
        ({"pp": 2, "dp": 32}, "pp = 1"),
        ({"recompute": "full"}, "recompute=full"),
        ({"offload_layers": 80}, "below the model's 80 layers"),
    ],
)
def test_offload_rules(update: dict[str, object], words: str) -> None:
    model, cluster = resolve_model("llama-3-70b"), resolve_cluster("gb200-nvl72:16")
    cfg = FSDP64.model_copy(update={"offload_layers": 40, **update})
    with pytest.raises(DomainError) as exc:
        estimate(model, cluster, W70, cfg)
    assert exc.value.field == "config.offload_layers" and words in exc.value.rule


def test_torchtitan_has_no_activation_offload() -> None:
    model, cluster = resolve_model("llama-3-8b"), resolve_cluster("dgx-h100:1")
    w = TrainingWorkload(global_batch_size=64, seq_len=8192, framework="torchtitan")
    with pytest.raises(DomainError) as exc:
        estimate(model, cluster, w, ParallelConfig(dp=8, zero_stage=3, offload_layers=8))
    assert exc.value.field == "config.offload_layers"


def test_pinned_offload_is_planned_and_exported() -> None:
    model, cluster = resolve_model("llama-3-70b"), resolve_cluster("gb200-nvl72:16")
    space = SearchSpace(pins=parse_pins(["offload_layers=40", "tp=1", "pp=1", "zero=3"]))
    r = plan(model, cluster, W70, space, time_limit_s=30, top_k=1)
    assert r.plan is not None and r.plan.config.offload_layers == 40 and r.plan.config.pp == 1
    assert "--cpu-offloading-num-layers 40" in export("megatron", model, W70, r.plan.config).content
