"""MoE serving under attention data parallelism (issue 39): the layouts the engines recommend are priced, the
routed-expert imbalance grows with EP at small batch and shrinks with redundant experts, and the engines' rules."""

from __future__ import annotations

import itertools

import pytest

from optimizer.costmodel.estimate import estimate
from optimizer.costmodel.moe_serving import (
    busiest_rank_prompt_tokens,
    expected_max_standard_normal,
    routed_load_imbalance,
)
from optimizer.errors import DomainError
from optimizer.spec.cluster_loading import build_cluster
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import InferenceWorkload

QWEN = load_model_preset("qwen3-235b-a22b")
NODE = build_cluster({"name": "n", "pools": [{"name": "p", "gpu": "H200-SXM-141GB", "nodes": 1, "gpus_per_node": 8}]})


def _w(engine: str = "trtllm", batch: int = 64) -> InferenceWorkload:
    return InferenceWorkload(
        prompt_len=1000, output_len=1000, batch=batch, precision="fp8", kv_cache_dtype="fp8", engine=engine
    )


def test_expected_maximum_of_normals_matches_the_tables() -> None:
    # Harter 1961: 0.5642 (n=2), 0.8463 (3), 1.0294 (4), 1.4236 (8)
    assert expected_max_standard_normal(1) == 0.0
    assert expected_max_standard_normal(2) == pytest.approx(0.5642, abs=1e-3)
    assert expected_max_standard_normal(3) == pytest.approx(0.8463, abs=1e-3)
    assert expected_max_standard_normal(4) == pytest.approx(1.0294, abs=1e-3)
    assert expected_max_standard_normal(8) == pytest.approx(1.4236, abs=1e-3)


def test_imbalance_grows_with_ep_at_small_batch_and_fades_at_large_batch() -> None:
    moe = QWEN.moe
    assert moe is not None
    small = [routed_load_imbalance(moe, 16, ep) for ep in (1, 2, 4, 8, 16)]
    assert small[0] == 1.0 and all(a < b for a, b in itertools.pairwise(small))
    assert routed_load_imbalance(moe, 16384, 8) < 1.05 < routed_load_imbalance(moe, 16, 8)


def test_redundant_experts_reduce_the_imbalance() -> None:
    ds = load_model_preset("deepseek-v3")
    assert ds.moe is not None
    plain = routed_load_imbalance(ds.moe, 256, 72)
    assert routed_load_imbalance(ds.moe, 256, 72, redundant=32) < plain
    assert routed_load_imbalance(ds.moe, 256, 72, redundant=256) == pytest.approx(1.0)


def test_prompts_are_dealt_whole_to_the_ranks() -> None:
    assert busiest_rank_prompt_tokens(0, 1000, 8) == 0
    assert busiest_rank_prompt_tokens(500, 1000, 8) == 500  # a chunk of one prompt on one rank
    assert busiest_rank_prompt_tokens(3000, 1000, 8) == 1000  # three prompts on three ranks
    assert busiest_rank_prompt_tokens(9000, 1000, 8) == 2000  # nine prompts: one rank takes two


@pytest.mark.parametrize("engine", ["trtllm", "sglang", "vllm"])
def test_both_attention_dp_layouts_are_priced(engine: str) -> None:
    ep = estimate(QWEN, NODE, _w(engine), ParallelConfig(tp=1, dp=8, ep=8, etp=1))
    tp_experts = estimate(QWEN, NODE, _w(engine), ParallelConfig(tp=1, dp=8, ep=1, etp=8))
    for e in (ep, tp_experts):
        assert e.feasible and e.tpot_s is not None and e.tpot_s > 0
        assert e.breakdown.ep_comm > 0  # dispatch / combine (all-to-all, or all-gather + reduce-scatter)
    # Eight ranks of 64 sequences each read the experts once per step: far more output than one TP-8 replica of 64.
    tp8 = estimate(QWEN, NODE, _w(engine), ParallelConfig(tp=8))
    assert ep.tokens_per_s > 2 * tp8.tokens_per_s


def test_trtllm_gathers_where_sglang_sends_to_the_experts() -> None:
    """TensorRT-LLM without MNNVL all-gathers every rank's tokens and reduce-scatters (each GPU receives all
    tokens); SGLang's all-to-all sends each token's top_k copies only: with 8 of 128 experts over 8 ranks the same
    bytes leave a rank, so the two are close; the all-gather is padded to the busiest rank."""
    trt = estimate(QWEN, NODE, _w("trtllm"), ParallelConfig(tp=1, dp=8, ep=8, etp=1))
    sgl = estimate(QWEN, NODE, _w("sglang"), ParallelConfig(tp=1, dp=8, ep=8, etp=1))
    assert trt.breakdown.ep_comm != sgl.breakdown.ep_comm
    assert 0.3 < trt.breakdown.ep_comm / sgl.breakdown.ep_comm < 3


@pytest.mark.parametrize(
    ("model", "engine", "cfg", "field", "needle"),
    [
        ("qwen3-235b-a22b", "trtllm", ParallelConfig(tp=2, dp=4, ep=8, etp=1), "config.tp", "trtllm"),
        ("qwen3-30b-a3b", "sglang", ParallelConfig(tp=1, dp=256, ep=256, etp=1), "config.ep", "sglang"),
        ("llama-3-8b", "vllm", ParallelConfig(tp=1, dp=8, ep=1, etp=8), "config.dp", "vllm"),
        ("qwen3-235b-a22b", "vllm", ParallelConfig(tp=2, dp=4, ep=1, etp=4), "config.etp", "etp=4"),
    ],
)
def test_layouts_the_engine_cannot_run_name_the_engine_and_rule(
    model: str, engine: str, cfg: ParallelConfig, field: str, needle: str
) -> None:
    pool = {"name": "p", "gpu": "H200-SXM-141GB", "nodes": 32, "gpus_per_node": 8}
    big = build_cluster({"name": "b", "pools": [pool]})
    with pytest.raises(DomainError) as exc:
        estimate(load_model_preset(model), big, _w(engine), cfg)
    assert exc.value.field == field and needle in str(exc.value)


def test_wide_ep_decode_dispatches_through_the_nic_as_deepep_low_latency_does() -> None:
    """[issue 50 §2] DeepEP's low-latency kernels (decode) send every routed copy over RDMA, NVLink peers off: an
    EP group over nodes pays all its copies at NIC speed; prefill iterations keep the NVLink-forwarding all-to-all."""
    from optimizer.costmodel import network as net
    from optimizer.costmodel.inference import deepep_serving_a2a
    from optimizer.spec.cluster_loading import load_cluster_preset

    cluster = load_cluster_preset("two-dgx-h100")
    tiers = net.cluster_tiers(cluster, cluster.pools[0])
    lv = net.group_levels(tiers, 16, 1)
    routed = 8 * 7168 * 128.0
    ll = deepep_serving_a2a(lv, routed, 1.0, "sglang", decode=True)
    nic = min(level.bw for level in lv if level.network)
    assert ll == pytest.approx(routed * 3 / nic)
    assert ll > net.all_to_all(lv, routed) + net.all_to_all(lv, routed * 2)
    assert deepep_serving_a2a(lv, routed, 1.0, "sglang", decode=False) is None
    assert deepep_serving_a2a(lv, routed, 1.0, "trtllm", decode=True) is None
    one_node = net.group_levels(tiers, 8, 1)
    assert deepep_serving_a2a(one_node, routed, 1.0, "vllm", decode=True) is None
