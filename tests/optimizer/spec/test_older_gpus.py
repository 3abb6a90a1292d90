"""Volta (V100) and the inference-tier cards (A10, A40, L4, T4): in the catalog as nvidia-smi names them; Volta and
Turing compute in FP16 only (bf16 is refused with the rule) and have no FlashAttention (the unfused softmax is priced
and the estimate says so); DGX-1 / DGX-2 presets; Megatron-LM v1.0's V100 runs come out as measured."""

from __future__ import annotations

import pytest

from accuracy.published_runs import load_records, predict
from optimizer.costmodel.estimate import estimate
from optimizer.errors import DomainError
from optimizer.search.planner import plan
from optimizer.spec.cluster_loading import resolve_cluster
from optimizer.spec.gpu_catalog import has_bf16, has_flash_attention, resolve_gpu
from optimizer.spec.model_loading import resolve_model
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import TrainingWorkload


@pytest.mark.parametrize(
    ("name", "catalog"),
    [
        ("Tesla V100-SXM2-32GB", "V100-SXM2-32GB"),
        ("Tesla V100-SXM2-16GB", "V100-SXM2-16GB"),
        ("Tesla V100-PCIE-32GB", "V100-PCIe-32GB"),
        ("Tesla V100-SXM3-32GB", "V100-SXM2-32GB"),
        ("V100", "V100-SXM2-32GB"),
        ("Tesla V100S-PCIE-32GB", "V100S-PCIe-32GB"),
    ],
)
def test_v100_names_resolve(name: str, catalog: str) -> None:
    gpu = resolve_gpu(name)
    assert gpu.name == catalog and gpu.family == "volta" and gpu.fp8_tflops is None


@pytest.mark.parametrize(
    ("name", "catalog", "bf16", "fp8"),
    [
        ("NVIDIA A10", "A10-24GB", True, False),
        ("NVIDIA A40", "A40-48GB", True, False),
        ("NVIDIA L4", "L4-24GB", True, True),
        ("Tesla T4", "T4-16GB", False, False),
    ],
)
def test_inference_cards_resolve_with_their_precisions(name: str, catalog: str, bf16: bool, fp8: bool) -> None:
    gpu = resolve_gpu(name)
    assert gpu.name == catalog and has_bf16(gpu) is bf16 and (gpu.fp8_tflops is not None) is fp8
    assert has_flash_attention(gpu) is (gpu.family != "turing")


def test_volta_has_neither_bf16_nor_flash_attention() -> None:
    v100, a100 = resolve_gpu("V100"), resolve_gpu("A100")
    assert not has_bf16(v100) and not has_flash_attention(v100)
    assert has_bf16(a100) and has_flash_attention(a100)


def test_presets() -> None:
    dgx1, dgx2 = resolve_cluster("dgx-1v:4"), resolve_cluster("dgx-2:2")
    assert dgx1.healthy_gpus == 32 and dgx2.healthy_gpus == 32
    assert dgx2.fabric_of(dgx2.pools[0]).domain_size == 16


def _w(precision: str, flash: bool = True) -> TrainingWorkload:
    return TrainingWorkload(global_batch_size=64, seq_len=2048, precision=precision, flash_attention=flash)  # type: ignore[arg-type]


CFG = ParallelConfig(tp=8, pp=1, dp=4, mbs=1, recompute="full", zero_stage=1)


def test_bf16_is_refused_with_the_rule_and_fp16_runs() -> None:
    model, cluster = resolve_model("llama-2-7b"), resolve_cluster("dgx-1v:4")
    with pytest.raises(DomainError) as err:
        estimate(model, cluster, _w("bf16"), CFG)
    assert err.value.field == "workload.precision" and "use fp16" in err.value.rule
    with pytest.raises(DomainError) as err:
        plan(model, cluster, _w("bf16"), time_limit_s=5)
    assert err.value.field == "workload.precision"
    e = estimate(model, cluster, _w("fp16"), CFG)
    assert e.feasible and e.step_time_s > 0


def test_attention_is_priced_unfused_on_volta_and_the_estimate_says_so() -> None:
    model = resolve_model("llama-2-7b")
    v100 = resolve_cluster("dgx-1v:4")
    flash, unfused = estimate(model, v100, _w("fp16"), CFG), estimate(model, v100, _w("fp16", False), CFG)
    assert flash.step_time_s == unfused.step_time_s  # no kernel to ask for
    assert any("no FlashAttention kernel" in n for n in flash.notes)
    a100 = resolve_cluster("dgx-a100:4")
    fa, no_fa = estimate(model, a100, _w("fp16"), CFG), estimate(model, a100, _w("fp16", False), CFG)
    assert fa.step_time_s < no_fa.step_time_s
    assert not any("no FlashAttention kernel" in n for n in fa.notes)


def test_megatron_v1_runs_on_a_dgx2h() -> None:
    recs = [r for r in load_records() if r["group"] == "megatron2019_v100_model_parallel"]
    assert len(recs) == 2
    for rec in recs:
        case = predict(rec)
        assert case is not None and abs(case.error) < 0.05, (rec["id"], case and case.error)


def test_megatron_overlaps_tp_communication_only_where_transformer_engine_runs() -> None:
    model, cluster = resolve_model("llama-2-7b"), resolve_cluster("dgx-2:4")
    cfg = ParallelConfig(tp=8, dp=8, mbs=1, sequence_parallel=True, tp_comm_overlap=True, zero_stage=1)
    with pytest.raises(DomainError) as err:
        estimate(model, cluster, _w("fp16"), cfg)
    assert err.value.field == "config.tp_comm_overlap" and "Transformer Engine" in err.value.rule
    picked = plan(model, cluster, _w("fp16"), time_limit_s=10).plan
    assert picked is not None and not picked.config.tp_comm_overlap
    assert estimate(model, resolve_cluster("dgx-a100:8"), _w("fp16"), cfg).feasible  # Ampere runs TE
