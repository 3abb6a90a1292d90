"""Pin the cost model's accuracy on the published runs so it cannot silently regress."""

from __future__ import annotations

import statistics

import pytest

from accuracy.published_runs import CalibrationCase, load_records, run_all, summary


@pytest.fixture(scope="module")
def cases() -> list[CalibrationCase]:
    return run_all()


def test_data_set_is_complete() -> None:
    records = load_records()
    assert len(records) == 151  # + torchao_float8_h100 (3)
    assert all(r["source"].get("title") or r["source"].get("url") for r in records)


def test_every_group_is_scored(cases: list[CalibrationCase]) -> None:
    groups = {c.group for c in cases}
    assert {
        "narayanan2021_table1_weak_scaling",
        "korthikanti2022_table5",
        "megatron_lm_readme_2024_h100_weak_scaling",
        "trtllm_v0.5_low_latency",
        "korthikanti2022_table4_per_layer",
        "narayanan2021_table2_zero3",
        "narayanan2021_table2_ptdp",
        "smith2022_mtnlg_megatron_deepspeed",
        "mosaicml_fsdp_a100",
        "mosaicml_fsdp_h100",
        "torchao_float8_h100",
        "bigscience2022_tr11_prequel",
        "bigscience2022_tr11_prequel_zero",
        "bigscience2022_bloom176b",
        "megatron_ci_h100_memory",
        "megatron_bridge_h100_fp8",
        "megatron_bridge_h100_fp8_moe",
        "megatron_bridge_blackwell",
        "megatron_bridge_blackwell_moe",
        "nemo2403_h100_long_sequence",
        "nemo2504_b200_long_sequence",
        "megatron2019_v100_model_parallel",
    } <= groups
    assert len(cases) >= 97


def test_issue_target(cases: list[CalibrationCase]) -> None:
    median, worst = summary(cases)
    assert median <= 0.10, f"median |error| {median:.1%} > 10%"
    assert worst <= 0.25, f"max |error| {worst:.1%} > 25%"


def test_pinned_accuracy(cases: list[CalibrationCase]) -> None:
    # Today's figures (benchmarks/model_accuracy.py) with a little headroom: a change that makes the model worse fails.
    median, worst = summary(cases)
    assert median <= 0.045
    assert worst <= 0.21  # TensorRT-LLM v0.5 Llama-70B TTFT at 128 input tokens on H100, -19.6%


# Each group's median |error| today (benchmarks/model_accuracy.py), with a little headroom. The issue's target is 8% for
# every group; smith2022 (Megatron-DeepSpeed, 1F1B) is predicted 16-19% too fast and stays pinned at its figure
# until the cause is found.
GROUP_MEDIANS = {
    "bigscience2022_bloom176b": 0.035,
    "bigscience2022_tr11_prequel": 0.05,
    "bigscience2022_tr11_prequel_zero": 0.065,
    "korthikanti2022_dp_scaling": 0.03,
    "korthikanti2022_table4_per_layer": 0.07,
    "korthikanti2022_table5": 0.07,
    "megatron_bridge_h100_fp8": 0.04,
    # Qwen3 MoE recipes (expert_tensor_parallel_size 1): the 235B ran with moe_a2a_overlap; priced as the
    # README describes it (each pass's all-to-all under the other pass's compute, slowing it while hidden) it is
    # predicted 12.6% too fast (16.3% while the output layer was priced in FP8). DeepSeek-V3 on 1,024 H100 (25.09,
    # DeepEP dispatch priced as the all-to-all, its MTP layer with the loss on the last rank): +0.2%; priced as a
    # 62nd decoder layer instead, -11.5%. Group median 4.2%; the issue's MoE target is 15%.
    "megatron_bridge_h100_fp8_moe": 0.05,
    "megatron_ci_h100_memory": 0.02,
    "megatron_lm_readme_2024_h100_weak_scaling": 0.04,
    "mosaicml_fsdp_a100": 0.045,
    "mosaicml_fsdp_h100": 0.04,
    # torchao float8 README (torchtitan 0.0.2): two terms fitted on it; median 8.5% (26.8% before, LOG.md).
    "torchao_float8_h100": 0.09,
    "narayanan2021_table1_weak_scaling": 0.045,
    # PyTorch FSDP2 + CP 2 with full activation checkpointing on 64 H100: +7.5% (the overlap slowdown under its
    # per-layer gathers and reduce-scatters; without that term it was -0.2%).
    "nemo_automodel_h100_fsdp2": 0.08,
    # NeMo 24.12 FP8 recipes, 7B to 175B on 8 to 512 H100: 5.4% (7.7% while the output layer was priced in FP8;
    # Megatron runs it in BF16). Llama 3 8B on one node is still predicted 14% too fast.
    "nemo2412_h100_fp8": 0.06,
    "narayanan2021_table2_ptdp": 0.03,
    "narayanan2021_table2_zero3": 0.025,
    "smith2022_mtnlg_megatron_deepspeed": 0.18,
    "megatron2019_v100_model_parallel": 0.05,
    # torchtitan's own benchmark (Dec 2024, Grand Teton H100 96 GB): max_memory_reserved of Llama 3.1 8B under FSDP
    # and CP against the predicted allocated peak plus the allocator slack; -2.5% to -3.7% since the slack stops at
    # 8 GiB.
    "torchtitan2412_h100_memory": 0.03,
    # Megatron-Bridge 26.06, Llama 3.1 405B FP8 / MXFP8 on 256 GB200 and 256 GB300 with the recipes' knobs: -0.6% to
    # +11.7% (GB300's matmul rate is derived from other GB300 / GB200 pairs, gpu_catalog.py); 26.04 Llama 3 70B FP8
    # Megatron-FSDP 64 with 40 offloaded layers on GB200: -5.7%. GB200's attention at Blackwell's shares: GB200 405B
    # +8.9% / +1.3%, 70B FSDP -2.6%; GB300 (Blackwell Ultra, Hopper's shares) unchanged.
    "megatron_bridge_blackwell": 0.06,
    # Megatron-Bridge 26.06 on 256 GB200 (EP 64 / 32 per rack) and 256 GB300, the recipes' knobs (HybridEP priced as
    # the all-to-all, A2A overlap): DeepSeek-V3 MXFP8 -3.5% / -0.2%, Qwen3-235B-A22B MXFP8 -8.3% / -2.4%.
    "megatron_bridge_blackwell_moe": 0.03,  # 1.3%: GB200 DeepSeek-V3 -0.1%, Qwen3-235B -5.1% (Blackwell attention)
    # Batch-1 prefill of 128 and 2,048 tokens. Serving now prices each kernel class on its own roofline and the
    # elementwise kernels after the GEMMs (costmodel/inference.py): the 2,048-token rows moved from -3% / +1% to
    # +5% / +5%; the H100 128-token row is -19.6% (too fast), the A100 one +10.9%.
    "trtllm_v0.5_low_latency": 0.085,
    # NeMo 24.03 long-sequence table, Llama 2 7B FP8 on 4-1,024 H100 at 4K-1M tokens (CP 1-32), attention at
    # FlashAttention-2 class rates (the stack predates FlashAttention-3): -3.2% to +5.4%, median 1.6%.
    "nemo2403_h100_long_sequence": 0.03,
    # NeMo 25.04 long-sequence table, Llama 3 8B FP8 on B200 at 8K-1M tokens (CP 1-16): -6.2% to -0.6%, median 2.6%,
    # with Blackwell's own FA3-class attention shares (0.8 x Hopper's: the softmax's exp rate did not double with
    # the tensor cores; constants.FLASH_ATTENTION_EFFICIENCY). With Hopper's shares: -10% to -20%.
    "nemo2504_b200_long_sequence": 0.04,
}


def test_every_group_is_pinned(cases: list[CalibrationCase]) -> None:
    by_group: dict[str, list[float]] = {}
    for c in cases:
        by_group.setdefault(c.group, []).append(abs(c.error))
    assert set(by_group) == set(GROUP_MEDIANS)
    for group, errors in by_group.items():
        median = statistics.median(errors)
        assert median <= GROUP_MEDIANS[group], f"{group}: median |error| {median:.1%}"


def test_every_comparison_pair_is_ordered(cases: list[CalibrationCase]) -> None:
    """Records that share a `compare` key ran the same model, batch and GPUs on different stacks: the one the
    authors measured faster must be predicted faster (Narayanan 2021 Table 2: PTD-P vs DeepSpeed ZeRO-3)."""
    by_id = {c.id: c for c in cases}
    pairs: dict[str, list[CalibrationCase]] = {}
    for rec in load_records():
        if rec.get("compare") and rec["id"] in by_id:
            pairs.setdefault(rec["compare"], []).append(by_id[rec["id"]])
    pairs = {k: v for k, v in pairs.items() if len(v) == 2}  # the 530B rows at 560 and 640 GPUs have no twin
    assert len(pairs) == 8  # + Megatron-Bridge 26.06 Llama 3.1 405B on 256 GB200 vs 256 GB300 (FP8, MXFP8)
    for key, (a, b) in pairs.items():
        assert (a.measured < b.measured) == (a.predicted < b.predicted), f"{key}: {a.id} vs {b.id}"


def test_peak_memory_matches_megatrons_ci(cases: list[CalibrationCase]) -> None:
    """Issue 13: per-GPU memory median error <= 8% where published. Megatron's own CI measures
    torch.cuda.max_memory_allocated of a 7B model on DGX H100 (interleaved tp1 pp4 vp8 and tp4 pp1)."""
    memory = [c for c in cases if c.metric.startswith("peak_allocated_gb")]
    assert len(memory) >= 2
    assert statistics.median(abs(c.error) for c in memory) <= 0.08
    assert max(abs(c.error) for c in memory) <= 0.05


def test_reserved_memory_matches_torchtitans_benchmark(cases: list[CalibrationCase]) -> None:
    """torchtitan logs torch.cuda.max_memory_reserved: the predicted allocated peak plus the allocator slack must
    land on it (per-op selective checkpointing, the unfused fp32 loss, FSDP2, CP; Llama 3.1 8B on 96 GB H100).
    The slack stops at 8 GiB (constants.TRAINING_SLACK_CAP_BYTES: Megatron-Bridge's GB200 recipes leave at most
    9.9 GB), so these runs sit 2.5-3.7% low; all of them low, none by more than 4%."""
    reserved = [c for c in cases if c.metric.startswith("peak_reserved_gb")]
    assert len(reserved) == 4
    assert all(-0.04 <= c.error <= 0.0 for c in reserved)


def test_published_runs_fit_with_their_published_knobs() -> None:
    """Issue 13: every published run that ran is feasible with its published knobs (where the source publishes
    the recompute setting and the micro-batch size). Among them NVIDIA's Llama 3.1 405B FP8 recipe on 1,024 H100
    (tp8 pp8 cp2 vp8 over 126 layers, no recompute), which the old equal-virtual-stage rule and bf16-sized FP8
    activations rejected."""
    from accuracy.published_runs import _cluster, _model, _training_space
    from optimizer.costmodel.estimate import estimate

    checked = []
    for rec in load_records():
        p, b = rec["parallel"], rec["batch"]
        if rec.get("kind") not in ("training_throughput", "training_memory"):
            continue
        if p.get("recompute") not in ("none", "selective", "full") or not b["micro_batch_size"]:
            continue
        model, cluster = _model(rec), _cluster(rec)
        w, configs, _ = _training_space(rec, model)
        fits = [estimate(model, cluster, w, c).feasible for c in configs]
        assert any(fits), rec["id"]
        checked.append(rec["id"])
    assert "megatron_bridge_h100_llama31_405b_fp8_1024gpu" in checked and len(checked) >= 40


def test_deepseek_v3_fits_with_its_knobs() -> None:
    """Issue 13: DeepSeek-V3 ran on 2,048 H800 with pp 16, ep 64, no TP, FP8 and RMSNorm / MLA up-projection
    recompute. Its routed experts save their permuted inputs in FP8 (TE GroupedLinear keeps the quantized input),
    not bf16: counted in bf16 the middle stages needed 96.5 GB of 80."""
    from accuracy.published_runs import _cluster, _model, _training_space
    from optimizer.costmodel.estimate import estimate

    rec = next(r for r in load_records() if r["id"] == "deepseek2024_v3_pretrain_2048_h800")
    model, cluster = _model(rec), _cluster(rec)
    w, configs, _ = _training_space(rec, model)
    assert any(estimate(model, cluster, w, c).feasible for c in configs)
