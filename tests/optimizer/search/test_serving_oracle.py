"""The serving planner's optimum equals an exhaustive search over the same space and cost model [issue 15]."""

from __future__ import annotations

import pytest

from optimizer.costmodel.estimate import estimate
from optimizer.search.inference_planner import plan_inference
from optimizer.search.request import SearchRequest
from optimizer.search.serving_oracle import serving_oracle
from optimizer.search.solver_params import TIME_UNIT_S
from optimizer.search.space import SearchSpace, parse_pins
from optimizer.spec.cluster_loading import build_cluster, resolve_cluster
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import InferenceWorkload


def small(preset: str, layers: int) -> ModelSpec:
    doc = load_model_preset(preset).model_dump()
    doc["num_layers"] = layers
    return ModelSpec.model_validate(doc)


HETERO = build_cluster(
    {
        "name": "h100-l40s",
        "pools": [
            {"name": "h100", "gpu": "H100-SXM-80GB", "nodes": 1, "gpus_per_node": 8},
            {"name": "l40s", "gpu": "L40S-48GB", "nodes": 2, "gpus_per_node": 4},
        ],
    }
)

CASES: list[tuple[str, ModelSpec, ClusterSpec, InferenceWorkload, list[str]]] = [
    (
        "dense, one node, latency",
        small("llama-3-8b", 6),
        resolve_cluster("dgx-h100"),
        InferenceWorkload(prompt_len=2048, output_len=256, batch=8),
        [],
    ),
    (
        "dense, one node, throughput",
        small("llama-3-8b", 6),
        resolve_cluster("dgx-h100"),
        InferenceWorkload(prompt_len=2048, output_len=256, batch=16, objective="throughput"),
        [],
    ),
    (
        "dense, H100 + L40S, latency",
        small("llama-2-70b", 5),
        HETERO,
        InferenceWorkload(prompt_len=4096, output_len=512, batch=32),
        ["tp<=4"],
    ),
    (
        "dense, H100 + L40S, throughput",
        small("llama-2-70b", 5),
        HETERO,
        InferenceWorkload(prompt_len=4096, output_len=512, batch=32, objective="throughput"),
        ["tp<=4"],
    ),
    (
        "MoE, one node",
        small("mixtral-8x7b", 4),
        resolve_cluster("dgx-h100"),
        InferenceWorkload(prompt_len=1024, output_len=128, batch=8),
        ["tp<=4"],
    ),
]


@pytest.mark.parametrize(("label", "model", "cluster", "w", "pins"), CASES, ids=[c[0] for c in CASES])
def test_serving_plan_equals_the_exhaustive_optimum(
    label: str, model: ModelSpec, cluster: ClusterSpec, w: InferenceWorkload, pins: list[str]
) -> None:
    space = SearchSpace(pins=parse_pins(pins))
    best = serving_oracle(model, cluster, w, space)
    assert best is not None, label
    result = plan_inference(SearchRequest(model, cluster, w, space, 60, top_k=1))
    assert result.status == "OPTIMAL" and result.plan is not None, (label, result.status)
    est = estimate(model, cluster, w, result.plan.config)
    assert est.feasible and est.tpot_s is not None
    c = result.plan.config
    objective = est.tpot_s * (c.gpus / (c.dp * w.batch) if w.objective == "throughput" else 1.0)
    # the CP-SAT tables round each stage time to TIME_UNIT_S: at most one unit per stage plus the hop term
    tolerance = (c.pp + 2) * TIME_UNIT_S * (c.gpus / (c.dp * w.batch) if w.objective == "throughput" else 1.0)
    assert objective <= best[0] + tolerance, (label, objective, best, c)
    assert objective >= best[0] - tolerance  # and the oracle finds nothing worse than what exists


def test_serving_expert_parallelism_is_the_engines_layout() -> None:
    """Serving EP spreads whole experts over a stage's tp x dp GPUs (vLLM --enable-expert-parallel, SGLang
    --ep-size); other layouts and pins name the rule instead of a training-grid error."""
    from optimizer.errors import DomainError
    from optimizer.search.planner import plan

    moe = small("mixtral-8x7b", 4)
    w = InferenceWorkload(prompt_len=1024, output_len=128, batch=8)
    cluster = resolve_cluster("dgx-h100")
    from optimizer.spec.parallel_config import ParallelConfig

    est = estimate(moe, cluster, w, ParallelConfig(tp=4, ep=4, etp=1))
    assert est.feasible and est.tpot_s is not None
    # EP given without etp takes the engines' default, whole experts [issue 50: --tp 8 --ep 8 was refused]
    assert estimate(moe, cluster, w, ParallelConfig(tp=4, ep=4)).tpot_s == est.tpot_s
    for cfg in (ParallelConfig(tp=4, ep=2, etp=1), ParallelConfig(tp=4, ep=4, etp=4)):
        with pytest.raises(DomainError, match="ep = tp x dp") as exc:
            estimate(moe, cluster, w, cfg)
        assert exc.value.field == "config.ep"
    for model, pins, rule in (
        (moe, ["ep=16", "tp<=4"], "whole experts"),
        (small("llama-3-8b", 4), ["ep=2"], "mixture-of-experts"),
    ):
        with pytest.raises(DomainError, match=rule) as exc:
            plan(model, cluster, w, SearchSpace(pins=parse_pins(pins)), top_k=1, time_limit_s=10)
        assert exc.value.field == "pin.ep"


def test_fp8_serving_keeps_embedding_and_lm_head_in_16_bits() -> None:
    """Quantized checkpoints store linear layers in FP8 and keep the embedding and the LM head in 16 bits (vLLM's
    Fp8Config, ModelOpt's '*lm_head*' exclusion): the stage's embedding memory is twice its parameter count."""
    model = load_model_preset("llama-3-8b")
    w = InferenceWorkload(prompt_len=1024, output_len=128, batch=8, precision="fp8")
    est = estimate(model, resolve_cluster("dgx-h100:1"), w, ParallelConfig())
    params = model.embedding_params + model.lm_head_params
    assert est.stages[0].memory_gb.embedding_lm_head == pytest.approx(params * 2 / 1e9, rel=0.01)
