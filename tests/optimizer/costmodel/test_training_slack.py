"""The allocator slack a training plan keeps free: 10% of the device up to 8 GiB (expandable segments), so the
GB200 recipes NVIDIA publishes fit with their published knobs and H100 plans keep what they kept."""

from __future__ import annotations

import pytest

from optimizer.costmodel.constants import CUDA_CONTEXT_BYTES, FRAGMENTATION_FRACTION, TRAINING_SLACK_CAP_BYTES
from optimizer.costmodel.estimate import estimate
from optimizer.costmodel.memory import training_reserve_bytes
from optimizer.spec.calibration import PoolCalibration
from optimizer.spec.cluster_loading import resolve_cluster
from optimizer.spec.model_loading import resolve_model
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.stage_layers import LayerRules
from optimizer.spec.workload import TrainingWorkload
from tests.optimizer.helpers import megatron_interleaved


def test_the_slack_stops_at_8_gib_and_a_fitted_fraction_applies_as_fitted() -> None:
    h100 = resolve_cluster("dgx-h100").gpu_of(resolve_cluster("dgx-h100").pools[0]).memory_bytes
    gb200 = resolve_cluster("gb200-nvl72").gpu_of(resolve_cluster("gb200-nvl72").pools[0]).memory_bytes
    # 80 GiB: 10% is 8 GiB, as before the cap
    assert training_reserve_bytes(h100) == pytest.approx(CUDA_CONTEXT_BYTES + FRAGMENTATION_FRACTION * h100)
    assert training_reserve_bytes(gb200) == pytest.approx(CUDA_CONTEXT_BYTES + TRAINING_SLACK_CAP_BYTES)
    assert training_reserve_bytes(gb200, 0.12) == pytest.approx(CUDA_CONTEXT_BYTES + 0.12 * gb200)
    assert PoolCalibration().memory_reserve == FRAGMENTATION_FRACTION  # the default is what the cap applies to


def test_nvidias_llama31_405b_fp8_gb200_recipe_fits_without_recompute() -> None:
    """Megatron-Bridge llama31_405b_pretrain_256gpu_gb200_fp8cs (perf_recipes/llama/gb200/llama31.py at 067f987:
    tp 4, pp 16, vp 4, mbs 1, no recompute, embedding and loss counted in the pipeline split); performance-summary
    26.06 container, DGX-GB200, 256 GPUs, GBS 1536, seq 8192: 843 tokens/s per GPU. With 10% of 186 GiB kept free
    it needed 207.9 GB and the planner fell back to full recompute (+42%)."""
    model = resolve_model("llama-3.1-405b")
    w = TrainingWorkload(
        global_batch_size=1536, seq_len=8192, precision="fp8", grad_dtype="bf16", fp8_param_gather=True
    )
    split = LayerRules.of(model, 16, 4, True).default_split()
    cfg = megatron_interleaved(tp=4, pp=16, dp=4, vp=4, mbs=1, tp_comm_overlap=True, layers_per_stage=split)
    e = estimate(model, resolve_cluster("gb200-nvl72:64"), w, cfg)
    assert e.feasible, e.reason
    assert w.tokens_per_step / e.step_time_s / 256 == pytest.approx(843, rel=0.10)


def test_nvidias_llama3_70b_fsdp_offload_gb200_recipe_fits() -> None:
    """Megatron-Bridge llama3_70b_pretrain_64gpu_gb200_fp8cs: Megatron-FSDP over 64, mbs 2, 40 layers offloaded."""
    w = TrainingWorkload(global_batch_size=256, seq_len=8192, precision="fp8", grad_dtype="bf16", fp8_param_gather=True)
    cfg = ParallelConfig(dp=64, zero_stage=3, mbs=2, offload_layers=40)
    e = estimate(resolve_model("llama-3-70b"), resolve_cluster("gb200-nvl72:16"), w, cfg)
    assert e.feasible, e.reason


@pytest.mark.parametrize(("preset", "gpu"), [("dgx-b300", "B300-270GB"), ("gb300-nvl72", "GB300-279GB")])
def test_blackwell_ultra_presets(preset: str, gpu: str) -> None:
    cluster = resolve_cluster(preset)
    assert cluster.gpu_of(cluster.pools[0]).name == gpu
    assert cluster.pools[0].inter_node.gbits_per_s == 800  # ConnectX-8
