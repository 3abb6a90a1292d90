"""Cost-model formulas against hand-computed figures."""

from __future__ import annotations

import pytest

from optimizer.costmodel import network as net
from optimizer.costmodel.estimate import estimate
from optimizer.costmodel.inference import kv_bytes_per_token_per_layer
from optimizer.costmodel.memory import (
    activation_bytes_per_layer,
    inflight_microbatches,
    stage_params,
    state_bytes_per_param,
)
from optimizer.costmodel.stage import StageCost
from optimizer.costmodel.training import pipeline_time
from optimizer.spec.cluster_loading import load_cluster_preset
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import TrainingWorkload

# The GPT layer the activation formulas of Korthikanti et al. 2022 (arXiv:2205.05198) are checked on.
GPT_H, GPT_HEADS = 4096, 32
GPT = ModelSpec(
    num_layers=4,
    hidden_size=GPT_H,
    ffn_hidden_size=4 * GPT_H,
    num_attention_heads=GPT_HEADS,
    vocab_size=51200,
    activation="gelu",
    norm="layernorm",
    linear_bias=True,
    dropout=True,
    tied_embeddings=True,
)


def test_70b_over_tp8_pp2_parameters_per_gpu() -> None:
    # A 70B dense model: 80 layers of 875M parameters (no embedding) split TP=8 x PP=2 -> 4.375B per GPU.
    layer = 875_000_000
    per_gpu = 40 * layer / 8
    assert per_gpu == 4.375e9 and per_gpu * 2 / 1e9 == 8.75


def test_stage_params_sum_to_model(llama70b: ModelSpec) -> None:
    c = ParallelConfig(tp=8, pp=2)
    total = 0.0
    for i, n in enumerate((40, 40)):
        dense, expert, emb = stage_params(llama70b, c, n, 0, i == 0, i == 1)
        total += (dense + expert + emb) * c.tp
    assert total == pytest.approx(llama70b.num_parameters)


def test_weight_memory_16bit(llama70b: ModelSpec, two_dgx_h100: ClusterSpec) -> None:
    est = estimate(
        llama70b,
        two_dgx_h100,
        TrainingWorkload(global_batch_size=16, seq_len=4096),
        ParallelConfig(tp=8, pp=2, zero_stage=1),
    )
    s0 = est.stages[0].memory_gb
    layer_params = 40 * llama70b.dense_layer_params / 8
    assert s0.weights == pytest.approx(layer_params * 2 / 1e9)
    # fp32 grads 4 B/param, optimizer 12 B/param (dp=1: nothing to shard) -> Megatron's 18 B/param
    assert (s0.weights + s0.gradients + s0.optimizer) == pytest.approx(layer_params * 18 / 1e9)


def test_megatron_bytes_per_param() -> None:
    assert sum(state_bytes_per_param(0, 8, 4, False)) == 18  # bf16 + fp32 main grads + Adam [MLM]
    assert sum(state_bytes_per_param(1, 8, 4, False)) == pytest.approx(6 + 12 / 8)  # distributed optimizer
    assert sum(state_bytes_per_param(2, 8, 2, False)) == pytest.approx(2 + 14 / 8)  # ZeRO-2 [Z20]
    assert sum(state_bytes_per_param(3, 8, 2, False)) == pytest.approx(16 / 8)  # ZeRO-3 [Z20]


def test_ring_all_reduce_volume() -> None:
    lv = (net.Level(members=8, bw=100e9, network=False, name="x"),)
    nbytes = 1e12  # large: NCCL's Simple protocol, latency 8.4 us + 3.4 us per ring step [NC tuning.cc]
    assert net.all_reduce(lv, nbytes) == pytest.approx(8.4e-6 + 14 * 3.4e-6 + 2 * 7 / 8 * nbytes / 100e9)
    assert net.all_gather(lv, nbytes) == pytest.approx(8.4e-6 + 7 * 3.4e-6 + 7 / 8 * nbytes / 100e9)


def test_hierarchical_all_reduce() -> None:
    # 4 nodes x 8 GPUs: RS + AG inside (7/8 P each over NVLink), AR across nodes of P/8 [formulas C7].
    lv = (net.Level(8, 360e9, False, "nvlink"), net.Level(4, 46e9, True, "network"))
    p = 1e12
    # Simple protocol; NCCL picks the tree's latency over the ring's (2x31 steps, 6 of them network) when lower:
    # 2 x ((8 - 1) NVLink hops + log2(4) network hops) [NC tuning.cc].
    ring = (2 * 31 - 6) * 3.4e-6 + 6 * 14e-6
    tree = 2 * (7 * 3.4e-6 + 2 * 14e-6)
    latency = 8.4e-6 + min(ring, tree)
    want = latency + 2 * 7 / 8 * p / 360e9 + 2 * 3 / 4 * (p / 8) / 46e9
    assert net.all_reduce(lv, p) == pytest.approx(want)


def test_group_levels_placement(two_dgx_h100: ClusterSpec) -> None:
    pool = two_dgx_h100.pools[0]
    tiers = net.pool_tiers(pool, two_dgx_h100.fabric_of(pool))
    assert [lv.name for lv in net.group_levels(tiers, 8, 1)] == ["nvlink"]  # TP=8 inside the node
    assert [(lv.name, lv.members) for lv in net.group_levels(tiers, 2, 8)] == [("network", 2)]  # DP after TP=8
    assert [(lv.name, lv.members) for lv in net.group_levels(tiers, 4, 4)] == [("nvlink", 2), ("network", 2)]


def test_small_message_is_latency_bound() -> None:
    lv = (net.Level(8, 360e9, False, "nvlink"),)
    t = net.all_reduce(lv, 16_384)  # a decode-step all-reduce, 16 KB [formulas G]: 6-25 us
    assert 6e-6 < t < 25e-6


def _stage(t: float) -> StageCost:
    return StageCost(
        fwd=t / 3,
        bwd=2 * t / 3,
        wgrad=t / 3,
        parts={},
        dp=0,
        zero=0,
        opt=0,
        weights=0,
        grads=0,
        optim=0,
        emb=0,
        transient=0,
        reserve=0,
        capacity=1,
        act_per_mb=0,
    )


@pytest.mark.parametrize(("p", "m"), [(4, 8), (8, 32), (2, 2)])
def test_1f1b_bubble_fraction(p: int, m: int) -> None:
    total, steady = pipeline_time(ParallelConfig(pp=p), m, [_stage(1.0)] * p)
    assert (total - steady) / steady == pytest.approx((p - 1) / m)


def test_interleaved_bubble_shrinks_by_v() -> None:
    p, m, v = 4, 8, 2
    total, steady = pipeline_time(ParallelConfig(pp=p, vp=v, schedule="interleaved-1f1b"), m, [_stage(1.0)] * p)
    assert (total - steady) / steady == pytest.approx((p - 1) / (m * v))


def test_zb_h1_bubble_is_a_third() -> None:
    # T_F = T_B = T_W: ZB-H1 bubble (p-1)(F+B-W) = a third of 1F1B's (p-1)(F+B+W) [Q23].
    p, m = 4, 8
    total, steady = pipeline_time(ParallelConfig(pp=p, schedule="zb-h1"), m, [_stage(1.0)] * p)
    assert (total - steady) / steady == pytest.approx((p - 1) / (3 * m))


def test_korthikanti_activation_formulas() -> None:
    s, b, h, a = 2048, 1, GPT_H, GPT_HEADS
    sbh = s * b * h
    no_par = ParallelConfig(mbs=b)
    assert activation_bytes_per_layer(GPT, no_par, s, False, False) == pytest.approx(sbh * (34 + 5 * a * s / h))
    t = 8
    tp = ParallelConfig(tp=t, mbs=b)
    assert activation_bytes_per_layer(GPT, tp, s, False, False) == pytest.approx(
        sbh * (10 + 24 / t + 5 * a * s / (h * t))
    )
    tp_sp = ParallelConfig(tp=t, mbs=b, sequence_parallel=True)
    assert activation_bytes_per_layer(GPT, tp_sp, s, False, False) == pytest.approx(sbh / t * (34 + 5 * a * s / h))
    sel = ParallelConfig(tp=t, mbs=b, sequence_parallel=True, recompute="selective")
    assert activation_bytes_per_layer(GPT, sel, s, False, False) == pytest.approx(34 * sbh / t)
    # FP8 (Transformer Engine): the QKV, fc1 and fc2 inputs saved as 1-byte copies, the projection's FP8 input
    # next to the bf16 attention output: 4 + 1 + 1 + 2 (dropout) replicated, 6 + 3 + (2 + 1) x 4 split = 29.
    assert activation_bytes_per_layer(GPT, sel, s, False, False, fp8=True) == pytest.approx(29 * sbh / t)
    full = ParallelConfig(tp=t, mbs=b, recompute="full")
    assert activation_bytes_per_layer(GPT, full, s, False, False) == pytest.approx(2 * sbh)


def test_inflight_microbatches() -> None:
    c = ParallelConfig(pp=4)
    assert [inflight_microbatches(c, r, 16) for r in range(4)] == [4, 3, 2, 1]
    assert inflight_microbatches(c, 0, 2) == 2  # m < p
    il = ParallelConfig(pp=4, vp=2, schedule="interleaved-1f1b")
    assert inflight_microbatches(il, 0, 16) == pytest.approx(4 * (1 + 3 / 8))  # K22 §4.2.3
    assert inflight_microbatches(ParallelConfig(pp=4, schedule="gpipe"), 0, 16) == 16


def test_kv_cache_bytes(llama70b: ModelSpec) -> None:
    # 2 (K and V) x 8 KV heads / TP 8 x 128 dims x 2 bytes per token per layer [formulas A6]
    assert kv_bytes_per_token_per_layer(llama70b, 8, 2) == 2 * 1 * 128 * 2
    assert kv_bytes_per_token_per_layer(llama70b, 16, 2) == 2 * 1 * 128 * 2  # at least one head per rank


def test_decode_sanity_70b_on_h100(llama70b: ModelSpec) -> None:
    from optimizer.spec.workload import InferenceWorkload

    est = estimate(
        llama70b,
        load_cluster_preset("dgx-h100"),
        InferenceWorkload(prompt_len=512, output_len=64),
        ParallelConfig(tp=8),
    )
    # formulas G sanity: 17.5 GB of weights per GPU at 0.8 x 3.35 TB/s + ~1.6 ms of all-reduce = ~8 ms/token on the
    # GPU, plus the engine's host time of every iteration (vLLM by default), as on the request-rate path
    from optimizer.costmodel.constants import ENGINE_ITERATION_OVERHEAD_S

    assert est.tpot_s is not None and 0.006 < est.tpot_s - ENGINE_ITERATION_OVERHEAD_S["vllm"] < 0.010


def test_step_breakdown_adds_up(llama70b: ModelSpec, two_dgx_h100: ClusterSpec) -> None:
    est = estimate(
        llama70b,
        load_cluster_preset("dgx-h100:8"),
        TrainingWorkload(global_batch_size=64, seq_len=4096),
        ParallelConfig(tp=8, pp=4, dp=2, zero_stage=1, sequence_parallel=True),
    )
    assert sum(est.breakdown.model_dump().values()) == pytest.approx(est.step_time_s, rel=1e-9)


def test_zero3_gathers_two_unsharded_layers_whatever_the_dp(llama70b: ModelSpec, two_dgx_h100: ClusterSpec) -> None:
    # ZeRO-3 prefetches one unsharded layer forward and one backward: 2 x 2 B x (layer params / tp), the same at
    # every dp (the layer is gathered whole) [formulas A2 "ZeRO-3 transient"; LA analysis.py training()].
    w = TrainingWorkload(global_batch_size=16, seq_len=4096)
    transients = []
    for dp in (2, 4):
        c = ParallelConfig(tp=4, pp=1, dp=dp, zero_stage=3)
        est = estimate(llama70b, two_dgx_h100, w, c)
        logits = 1 * 4096 * llama70b.vocab_size / 4 * 6
        transients.append(est.stages[0].memory_gb.transient * 1e9 - logits)
    assert transients[0] == pytest.approx(transients[1])
    assert transients[0] == pytest.approx(2 * 2 * llama70b.dense_layer_params / 4)
