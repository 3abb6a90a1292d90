"""Expert parallelism carved out of tp x dp x cp with an expert tensor-parallel degree (issue 13): Megatron's
expert grid etp x ep x expert-dp over each stage's GPUs [megatron/core/parallel_state.py], so published layouts
such as Qwen3-235B's tp=2 dp=16 ep=32 (etp=1) are admitted, priced and exported."""

from __future__ import annotations

import pytest

from optimizer.costmodel.estimate import estimate
from optimizer.errors import DomainError
from optimizer.exports.launch import export
from optimizer.search.planner import plan
from optimizer.search.space import SearchSpace, parse_pins
from optimizer.spec.cluster_loading import load_cluster_preset
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.model_spec import ModelSpec, MoESpec
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import TrainingWorkload
from tests.optimizer.helpers import megatron_interleaved

QWEN3_235B = ModelSpec(
    name="qwen3-235b-a22b",
    num_layers=94,
    hidden_size=4096,
    ffn_hidden_size=12288,
    num_attention_heads=64,
    num_kv_heads=4,
    head_dim=128,
    vocab_size=151936,
    moe=MoESpec(num_experts=128, top_k=8, expert_ffn_hidden_size=1536),
)
W = TrainingWorkload(global_batch_size=8192, seq_len=4096, precision="fp8", grad_dtype="bf16")
RECIPE = megatron_interleaved(tp=2, pp=8, dp=16, ep=32, etp=1, vp=4)


def test_published_qwen3_235b_layout_is_admitted_and_priced() -> None:
    cluster = load_cluster_preset("dgx-h100:32")
    est = estimate(QWEN3_235B, cluster, W, RECIPE)
    assert est.feasible
    # Experts split over ep x etp = 32 ranks: each GPU holds 4 of the 128 experts of its layers, whole.
    with pytest.raises(DomainError) as exc:
        estimate(QWEN3_235B, cluster, W, RECIPE.model_copy(update={"etp": None}))
    assert exc.value.field == "config.ep" and "ep x etp = 32 x 2" in exc.value.rule
    planned = RECIPE.model_copy(update={"layers_per_stage": [s.layers for s in est.stages]})
    args = export("megatron", QWEN3_235B, W, planned).content
    assert "--expert-tensor-parallel-size 1" in args and "--expert-model-parallel-size 32" in args


def test_expert_tp_changes_memory_and_tp_traffic() -> None:
    cluster = load_cluster_preset("dgx-h100:32")
    one = estimate(QWEN3_235B, cluster, W, RECIPE)
    # etp = tp = 2 with ep = 16: the same 32 ranks per expert grid, experts now split over TP as well
    two = estimate(QWEN3_235B, cluster, W, RECIPE.model_copy(update={"etp": 2, "ep": 16}))
    assert one.stages[1].memory_gb.weights == pytest.approx(two.stages[1].memory_gb.weights, rel=1e-6)
    # etp = 1: no TP collective around the MoE MLP, only the attention's
    assert one.breakdown.tp_comm == pytest.approx(two.breakdown.tp_comm / 2, rel=0.01)


def test_frameworks_run_their_own_expert_grids() -> None:
    mixtral, cluster = load_model_preset("mixtral-8x7b"), load_cluster_preset("dgx-h100:8")
    w = TrainingWorkload(global_batch_size=256, seq_len=4096, framework="torchtitan")
    c = ParallelConfig(tp=2, dp=32, ep=8, etp=2, sequence_parallel=True, zero_stage=3)
    with pytest.raises(DomainError) as exc:  # torchtitan: EP borrows ranks from FSDP and TP, experts unsplit
        estimate(mixtral, cluster, w, c)
    assert exc.value.field == "config.etp"
    assert estimate(mixtral, cluster, w, c.model_copy(update={"etp": 1})).step_time_s > 0
    ds = w.model_copy(update={"framework": "deepspeed"})
    with pytest.raises(DomainError) as exc:
        estimate(mixtral, cluster, ds, c.model_copy(update={"etp": 1, "tp_comm_overlap": False}))
    assert exc.value.field == "config.etp"


def test_planner_finds_the_expert_grid_a_pin_needs() -> None:
    """tp=2 dp=4 ep=8 fits only as etp=1 (ep x etp = 8 divides tp x dp = 8); the old rule 'ep divides dp x cp'
    had no plan."""
    mixtral, cluster = load_model_preset("mixtral-8x7b"), load_cluster_preset("dgx-h100:8")
    w = TrainingWorkload(global_batch_size=256, seq_len=4096)
    pins = parse_pins(["tp=2", "dp=4", "cp=1", "ep=8", "pp=2"])
    res = plan(mixtral, cluster, w, SearchSpace(pins=pins), time_limit_s=30)
    assert res.status == "OPTIMAL" and res.plan is not None
    assert res.plan.config.expert_tp == 1 and res.plan.config.ep == 8


def test_ep_overlap_is_priced_with_its_memory_and_rules() -> None:
    """--overlap-moe-expert-parallel-comm: each pass's all-to-all under the other pass's compute, one more warm-up
    micro-batch of activations [MLM schedules.py get_pp_rank_microbatches], and Megatron's preconditions."""
    cluster = load_cluster_preset("dgx-h100:32")
    plain = estimate(QWEN3_235B, cluster, W, RECIPE)
    overlap = RECIPE.model_copy(update={"ep_comm_overlap": True})
    over = estimate(QWEN3_235B, cluster, W, overlap)
    assert over.breakdown.ep_comm < plain.breakdown.ep_comm
    assert over.step_time_s < plain.step_time_s
    assert over.stages[0].memory_gb.activations > plain.stages[0].memory_gb.activations
    planned = overlap.model_copy(update={"layers_per_stage": [s.layers for s in over.stages]})
    assert "--overlap-moe-expert-parallel-comm" in export("megatron", QWEN3_235B, W, planned).content
    for bad, rule in (
        ({"vp": 1, "schedule": "1f1b"}, "needs vp > 1"),
        ({"recompute": "full"}, "full recompute"),
    ):
        with pytest.raises(DomainError) as exc:
            estimate(QWEN3_235B, cluster, W, overlap.model_copy(update=bad))
        assert exc.value.field == "config.ep_comm_overlap" and rule in exc.value.rule
    tt = W.model_copy(update={"framework": "torchtitan"})
    with pytest.raises(DomainError) as exc:
        estimate(QWEN3_235B, cluster, tt, overlap)
    assert exc.value.field == "config.ep_comm_overlap" and "torchtitan" in exc.value.rule


def test_expert_pins_on_a_dense_model_name_the_rule_and_plans_show_expert_knobs() -> None:
    llama, cluster = load_model_preset("llama-3-8b"), load_cluster_preset("dgx-h100:1")
    w = TrainingWorkload(global_batch_size=64, seq_len=4096)
    for pin, field in (("ep_comm_overlap=true", "pin.ep_comm_overlap"), ("etp=1", "pin.etp")):
        with pytest.raises(DomainError) as exc:
            plan(llama, cluster, w, SearchSpace(pins=parse_pins([pin])), time_limit_s=5)
        assert exc.value.field == field and "dense" in exc.value.rule
    mixtral = load_model_preset("mixtral-8x7b")
    pins = parse_pins(["tp=2", "dp=4", "cp=1", "ep=8", "pp=2", "vp=2", "ep_comm_overlap=true"])
    res = plan(mixtral, load_cluster_preset("dgx-h100:8"), TrainingWorkload(global_batch_size=256, seq_len=4096),
               SearchSpace(pins=pins), time_limit_s=30)  # fmt: skip
    assert res.plan is not None and res.plan.config.ep_comm_overlap
    assert "etp=1" in res.explanation.summary and "ep-overlap" in res.explanation.summary
