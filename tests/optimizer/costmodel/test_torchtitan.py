"""torchtitan as its code runs: per-op selective activation checkpointing and the unfused fp32 loss, checked against
the memory torchtitan's own benchmark published (benchmarks/llama3_h100_202412_torchtitan.md, torchtitan 9dec370,
Grand Teton H100 96 GB HBM2e; the figures are torch.cuda.max_memory_reserved, components/metrics.py)."""

from __future__ import annotations

import pytest

from accuracy.published_runs import load_records
from optimizer.costmodel.estimate import estimate
from optimizer.costmodel.memory import activation_bytes_per_layer
from optimizer.costmodel.op_sac import block_matmuls, recomputed_flops_per_token, saved_bytes_per_token
from optimizer.costmodel.stage import CostContext
from optimizer.spec.cluster_loading import build_cluster
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.model_loading import resolve_model
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import TrainingWorkload

# Meta's Grand Teton H100 as the data set's torchtitan records describe it (96 GB HBM2e at 2.4 TB/s, 500 W). Only
# memory and same-hardware ratios are asserted on it: the power limit leaves the compute peak unknown.
GRAND_TETON_H100 = next(r["cluster"]["gpu_spec"] for r in load_records() if r["group"] == "torchtitan2412_h100_memory")


def _grand_teton(nodes: int) -> ClusterSpec:
    return build_cluster(
        {
            "name": "grand-teton",
            "gpu_types": [GRAND_TETON_H100],
            "pools": [
                {
                    "name": "gt",
                    "gpu": "H100-GT-96GB",
                    "nodes": nodes,
                    "gpus_per_node": 8,
                    "intra_node": {"kind": "nvlink", "gbytes_per_s": 450, "domain_size": 8},
                    "inter_node": {"nics_per_node": 8, "gbits_per_s": 400},
                }
            ],
        }
    )


def test_selective_keeps_every_other_matmul_output() -> None:
    """Llama's block issues wq, wk, wv, wo, w1, w3, w2; the policy saves the 1st, 3rd, 5th and 7th outputs, the
    attention output with its log-sum-exp, and the block input; it recomputes wk, wo and w3."""
    m = resolve_model("llama-3-8b")
    h, q, kv, f, a = m.hidden_size, m.q_dim, m.kv_dim, m.ffn_hidden_size, m.num_attention_heads
    assert [mm.width for mm in block_matmuls(m, False)] == [q, kv, kv, h, f, f, h]
    assert saved_bytes_per_token(m, 1, False, False) == pytest.approx(2 * (h + q + kv + f + h) + 2 * q + 4 * a)
    assert recomputed_flops_per_token(m, False) == pytest.approx(2 * h * kv + 2 * q * h + 2 * h * f)


def test_torchtitan_selective_is_not_megatrons() -> None:
    """Megatron's default selective recompute (the attention core) keeps almost every activation under flash
    attention; torchtitan's per-op policy keeps less than half of that and pays for it in recompute."""
    m = resolve_model("llama-3-8b")
    c = ParallelConfig(dp=8, zero_stage=3, recompute="selective", mbs=2)
    megatron = activation_bytes_per_layer(m, c, 8192, False, True)
    titan = activation_bytes_per_layer(m, c, 8192, False, True, selective="every_other_matmul")
    assert titan < 0.5 * megatron
    cluster = _grand_teton(1)
    gpu, pool = cluster.gpu_of(cluster.pools[0]), cluster.pools[0]
    for fw, expect_recompute in (("megatron", False), ("torchtitan", True)):
        w = TrainingWorkload(global_batch_size=16, seq_len=8192, framework=fw)
        lc = CostContext(m, cluster, w, c, 1).layer(pool, gpu, False)
        assert (lc.recompute > 0.1 * lc.fwd) is expect_recompute


def test_torchtitan_loss_holds_fp32_logits() -> None:
    """torchtitan's loss is F.cross_entropy on pred.float(): 12 bytes per logit at its peak against Megatron's
    fused vocab-parallel loss at 6; on one GPU the last stage's transient differs by exactly that."""
    m = resolve_model("llama-3-8b")
    cluster = _grand_teton(1)
    c = ParallelConfig(dp=8, zero_stage=3, recompute="full", mbs=1)
    est = {
        fw: estimate(m, cluster, TrainingWorkload(global_batch_size=8, seq_len=8192, framework=fw), c)
        for fw in ("megatron", "torchtitan")
    }
    logits = 8192 * m.vocab_size
    gap = est["torchtitan"].stages[0].memory_gb.transient - est["megatron"].stages[0].memory_gb.transient
    assert gap == pytest.approx(logits * 6 / 1e9, rel=0.01)


@pytest.mark.parametrize(
    ("label", "nodes", "seq", "local_batch", "cp", "recompute", "precision", "reserved_gib"),
    [
        ("Table 1: FSDP 8, local batch 2, selective", 1, 8192, 2, 1, "selective", "bf16", 82.4),
        ("Table 3: FSDP 128, local batch 2, selective", 16, 8192, 2, 1, "selective", "bf16", 67.0),
        ("Table 2: FSDP 8, CP 1, 32K, full, Float8", 1, 32768, 1, 1, "full", "fp8", 83.9),
        ("Table 2: FSDP 2, CP 4, 128K, full, Float8", 1, 131072, 1, 4, "full", "fp8", 84.0),
    ],
)
def test_published_torchtitan_memory(
    label: str, nodes: int, seq: int, local_batch: int, cp: int, recompute: str, precision: str, reserved_gib: float
) -> None:
    """Each run fits; the reserved peak it logged lies above the predicted allocated peak and within 3% of the
    predicted total, which adds the CUDA context and the allocator slack the planner keeps free (10% of the device,
    at most 8 GiB: Megatron-Bridge's GB200 recipes leave at most 9.9 GB, constants.TRAINING_SLACK_CAP_BYTES)."""
    m = resolve_model("llama-3-8b")
    gpus = nodes * 8
    dp = gpus // cp
    w = TrainingWorkload(global_batch_size=dp * local_batch, seq_len=seq, framework="torchtitan", precision=precision)
    cfg = ParallelConfig(dp=dp, cp=cp, zero_stage=3, recompute=recompute, mbs=local_batch)
    e = estimate(m, _grand_teton(nodes), w, cfg)
    assert e.feasible, f"{label}: {e.reason}"
    reserved_gb = reserved_gib * 2**30 / 1e9
    assert e.peak_allocated_gb <= reserved_gb, label
    assert reserved_gb == pytest.approx(e.peak_memory_gb, rel=0.03), label


def test_fused_loss_overrides_the_framework_default() -> None:
    """torchtitan with its loss compiled (compile.components includes loss), or llm-foundry's flash-attn loss,
    holds no fp32 logits beside their gradient: `fused_loss` prices it as Megatron's; false forces the unfused one."""
    m = resolve_model("llama-3-8b")
    cluster = _grand_teton(1)
    c = ParallelConfig(dp=8, zero_stage=3, recompute="full", mbs=1)

    def transient(framework: str, fused: bool | None) -> float:
        w = TrainingWorkload(global_batch_size=8, seq_len=8192, framework=framework, fused_loss=fused)
        return estimate(m, cluster, w, c).stages[0].memory_gb.transient

    assert transient("torchtitan", True) == pytest.approx(transient("megatron", None))
    assert transient("megatron", False) == pytest.approx(transient("torchtitan", None))
    assert transient("torchtitan", None) > transient("torchtitan", True)


@pytest.mark.parametrize(
    ("label", "model_name", "nodes", "gbs", "precision", "vanilla_tps", "async_tps"),
    [
        # benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md: FSDP 32 x TP 8, full AC, local batch 16
        ("70B bf16", "llama-3-70b", 32, 512, "bf16", 597.3, 652.4),
        ("70B float8 tensorwise", "llama-3-70b", 32, 512, "fp8", 809.8, 942.4),
        # the same file: 8B on 64 H100, FSDP 8 x TP 8, per-op SAC, local batch 12
        ("8B bf16", "llama-3-8b", 8, 96, "bf16", 4378.0, 4809.4),
        ("8B float8 tensorwise", "llama-3-8b", 8, 96, "fp8", 5078.1, 5570.1),
        # benchmarks/llama3_h100_202412_torchtitan.md Table 4: 70B 2D, float8, full AC, local batch 16
        ("70B 2D float8, Dec 2024", "llama-3-70b", 32, 512, "fp8", 829.0, 876.0),
    ],
)
def test_async_tp_speedup_as_published(
    label: str, model_name: str, nodes: int, gbs: int, precision: str, vanilla_tps: float, async_tps: float
) -> None:
    """torchtitan's async TP gains 6-16% on these runs; the ideal overlap predicted 18-34%. The same 70B float8
    configuration measured 1.06 (Dec 2024) and 1.16 (Jun 2025): one model value sits at best 0.05 from each, so
    the tolerance is 0.07."""
    m = resolve_model(model_name)
    w = TrainingWorkload(global_batch_size=gbs, seq_len=8192, precision=precision, framework="torchtitan")
    rc = "full" if model_name == "llama-3-70b" else "selective"
    base = {"tp": 8, "dp": nodes, "zero_stage": 3, "recompute": rc, "sequence_parallel": True, "mbs": gbs // nodes}
    cluster = _grand_teton(nodes)
    vanilla = estimate(m, cluster, w, ParallelConfig(**base)).step_time_s
    overlap = estimate(m, cluster, w, ParallelConfig(**base, tp_comm_overlap=True)).step_time_s
    predicted, measured = vanilla / overlap, async_tps / vanilla_tps
    assert abs(predicted - measured) <= 0.07, f"{label}: predicted {predicted:.3f}, measured {measured:.3f}"


@pytest.mark.parametrize(
    ("label", "model_name", "nodes", "gbs", "base", "bf16_tps", "fp8_tps"),
    [
        # llama3_h100_202412_torchtitan.md Tables 1 and 3: FSDP + torch.compile, then + Float8; local batch 2
        ("8B FSDP 8", "llama-3-8b", 1, 16, {"dp": 8, "recompute": "selective", "mbs": 2}, 6667.0, 8532.0),
        ("8B FSDP 128", "llama-3-8b", 16, 256, {"dp": 128, "recompute": "selective", "mbs": 2}, 6514.0, 8380.0),
        # asyncTP_llama3_h100_2025-06_torchtitan.md, vanilla TP rows: bfloat16 vs float8 tensorwise
        (
            "70B FSDP 32 x TP 8",
            "llama-3-70b",
            32,
            512,
            {"tp": 8, "dp": 32, "recompute": "full", "mbs": 16},
            597.3,
            809.8,
        ),
        (
            "8B FSDP 8 x TP 8",
            "llama-3-8b",
            8,
            96,
            {"tp": 8, "dp": 8, "recompute": "selective", "mbs": 12},
            4378.0,
            5078.1,
        ),
    ],
)
def test_float8_speedup_as_published(
    label: str, model_name: str, nodes: int, gbs: int, base: dict[str, object], bf16_tps: float, fp8_tps: float
) -> None:
    """torchao's float8 gains 16-36% on these runs; without pricing its operand casts the model predicted 29-48%
    (the casts weigh more against the GEMMs of the smaller model)."""
    m = resolve_model(model_name)
    cluster = _grand_teton(nodes)
    cfg = ParallelConfig(zero_stage=3, sequence_parallel=base.get("tp", 1) != 1, **base)  # type: ignore[arg-type]
    t = {
        prec: estimate(
            m,
            cluster,
            TrainingWorkload(global_batch_size=gbs, seq_len=8192, precision=prec, framework="torchtitan"),
            cfg,
        ).step_time_s
        for prec in ("bf16", "fp8")
    }
    predicted, measured = t["bf16"] / t["fp8"], fp8_tps / bf16_tps
    assert abs(predicted - measured) <= 0.07, f"{label}: predicted {predicted:.3f}, measured {measured:.3f}"
