"""The best MFU any published training run reached, per GPU family and GEMM precision: the edge of measured
territory (issue 44 §3). A prediction whose MFU lies above it claims what no published run has shown; its interval
is widened to reach the step time the best published MFU gives (uncertainty.with_intervals) and the estimate says
so (`Estimate.beyond_measured`).

MFU as the published runs report it or as their model TFLOP/s per GPU give it, over the GPU's dense BF16 peak (FP8 runs
included, so above 50% is possible for them), the convention of Estimate.mfu. Every entry is the maximum over
accuracy/data/published_runs.json (tests/accuracy/test_published_mfu.py recomputes it), cited by its record and
source. Families without a published training MFU (volta, ada, cdna*) have no entry: no comparison is made.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PublishedMFU:
    """The best published MFU of one GPU family and precision."""

    mfu: float
    """Model FLOPs over the dense BF16 peak."""
    record: str
    """Record id in accuracy/data/published_runs.json."""
    source: str
    """Its source, in short."""


BEST_PUBLISHED_MFU: dict[tuple[str, str], PublishedMFU] = {
    # MosaicML LLM Foundry MPT-7B, 8 x A100 80 GB, seq 2048: MFU 0.6423 (scripts/train/benchmarking/README.md).
    ("ampere", "bf16"): PublishedMFU(0.6423, "mosaicml_mpt7b_a100_8gpu_s2048", "MosaicML LLM Foundry benchmarks"),
    # Megatron-LM README weak scaling (Megatron-Core r0.8.0), 16B on H100: 49% (model_table.png).
    ("hopper", "bf16"): PublishedMFU(0.49, "megatron_core_h100_weak_16B", "Megatron-LM README, 2024-07"),
    # NeMo 24.12 performance summary, GPT3-175B FP8 on 512 H100: 888 model TFLOP/s per GPU / 989.
    ("hopper", "fp8"): PublishedMFU(0.8979, "nemo2412_h100_fp8_gpt3_175b_512gpu", "NeMo 24.12 performance summary"),
    # Megatron-Bridge 26.06 archive, Llama 3.1 405B FP8 on 256 GB200: 2,129 model TFLOP/s per GPU / 2,500.
    ("blackwell", "fp8"): PublishedMFU(
        0.8516, "megatron_bridge2606_gb200_llama31_405b_fp8_256gpu", "Megatron-Bridge 26.06 performance summary"
    ),
    # Megatron-Bridge 26.06 archive, Llama 3.1 405B FP8 on 256 GB300 (over GB300's dense BF16 peak).
    ("blackwell-ultra", "fp8"): PublishedMFU(
        1.0584, "megatron_bridge2606_gb300_llama31_405b_fp8_256gpu", "Megatron-Bridge 26.06 performance summary"
    ),
}


def best_published(family: str, precision: str) -> PublishedMFU | None:
    """The best published MFU of a GPU family at a precision (fp8 and the 4-bit formats compare with fp8; the
    16-bit ones with bf16), or None where no run is published."""
    return BEST_PUBLISHED_MFU.get((family, "bf16" if precision in ("bf16", "fp16") else "fp8"))
