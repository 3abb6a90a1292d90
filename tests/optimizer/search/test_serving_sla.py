"""SLA plans [issue 17]: the steady-state replica model, the fleet search against brute force, infeasible SLAs,
bad input, and the published serving rows."""

from __future__ import annotations

import itertools
import json
import math
import statistics
from importlib import resources
from typing import Any

import pytest

from accuracy.plan_quality import SERVING_SCENARIOS, ServingScenario
from accuracy.serving_runs import held_out_serving, load_serving_records, run_serving
from optimizer.costmodel.compute import hbm_time
from optimizer.costmodel.constants import ENGINE_ITERATION_OVERHEAD_S
from optimizer.costmodel.inference import StepWork, kv_bytes_per_token_per_layer, stage_time
from optimizer.costmodel.memory import stage_params
from optimizer.costmodel.serving_load import PrefillLoad, ReplicaLoad
from optimizer.errors import DomainError
from optimizer.exports.launch import export, export_fleet
from optimizer.frameworks.validation import validate
from optimizer.search.planner import plan
from optimizer.search.serving_fleet import FleetSearch
from optimizer.search.space import SearchSpace, parse_pins
from optimizer.spec.cluster_loading import build_cluster, resolve_cluster
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import InferenceWorkload, TrainingWorkload
from optimizer.spec.workload_loading import build_inference
from tests.optimizer.exports.test_export_paste import argv, flag_values
from tests.optimizer.helpers import h100_a100_priced

TWO_POOLS = h100_a100_priced("h100-a100", h100_nodes=2)
MODEL = load_model_preset("llama-3-8b")


def replica(w: InferenceWorkload, tp: int = 1, pool: str = "h100") -> ReplicaLoad:
    cfg = ParallelConfig(tp=tp, stage_pools=[pool])
    return ReplicaLoad(MODEL, TWO_POOLS, w, cfg, validate(MODEL, TWO_POOLS, w, cfg))


def test_latency_grows_with_rate_and_saturates() -> None:
    """TPOT and TTFT rise with the rate; past the saturated rate there is no steady state; Little's law holds."""
    w = InferenceWorkload(prompt_len=1024, output_len=256, engine="vllm")
    r = replica(w)
    top = r.max_rate()
    assert top > 0
    points = [r.at_rate(top * f) for f in (0.1, 0.4, 0.7, 0.95)]
    assert all(p is not None for p in points)
    tpots = [p.step_s for p in points if p is not None]
    ttfts = [p.ttft_p90_s for p in points if p is not None]
    assert tpots == sorted(tpots) and ttfts == sorted(ttfts)
    assert r.at_rate(top * 1.05) is None
    p = points[2]
    assert p is not None
    assert p.decoding == pytest.approx(p.rate * w.output_len * p.step_s, rel=1e-9)  # Little's law
    assert p.ttft_p90_s >= p.ttft_mean_s


def test_max_rate_meets_its_targets_and_is_tight() -> None:
    w = InferenceWorkload(prompt_len=2048, output_len=512)
    r = replica(w)
    rate = r.max_rate(ttft_s=0.5, tpot_s=0.03)
    p = r.at_rate(rate)
    assert p is not None and p.step_s <= 0.03 + 1e-9 and p.ttft_p90_s <= 0.5 + 1e-9
    q = r.at_rate(rate * 1.01)
    assert q is None or q.step_s > 0.03 or q.ttft_p90_s > 0.5


def test_kv_dtype_and_engine_reservation_set_concurrency() -> None:
    """FP8 KV holds about twice the tokens of BF16; TensorRT-LLM reserves prompt + all output per request."""
    bf16 = replica(InferenceWorkload(prompt_len=1000, output_len=1000, kv_cache_dtype="bf16", engine="trtllm"))
    fp8 = replica(InferenceWorkload(prompt_len=1000, output_len=1000, kv_cache_dtype="fp8", engine="trtllm"))
    assert fp8.kv_tokens == pytest.approx(2 * bf16.kv_tokens, rel=0.01)
    vllm = replica(InferenceWorkload(prompt_len=1000, output_len=1000, kv_cache_dtype="fp8", engine="vllm"))
    assert bf16.max_decoding == pytest.approx(bf16.kv_tokens / 2000)
    assert vllm.max_decoding == pytest.approx(min(1024, vllm.kv_tokens / 1500))


def test_int4_weights_read_a_quarter_of_bf16() -> None:
    """Weight-only int4: decode at batch 1 is weight-read bound, so about 4x fewer bytes per step."""
    w16 = InferenceWorkload(prompt_len=128, output_len=128)
    w4 = InferenceWorkload(prompt_len=128, output_len=128, weight_dtype="int4")
    assert w4.weight_bytes == 0.5
    host = ENGINE_ITERATION_OVERHEAD_S["vllm"]  # the host's share is the same for both
    t16, t4 = replica(w16).iteration_s(1, 0) - host, replica(w4).iteration_s(1, 0) - host
    assert t4 < t16 * 0.4


def test_prefill_instance_queue() -> None:
    w = InferenceWorkload(prompt_len=4096, output_len=256)
    pre = PrefillLoad(replica(w), transfer_s=0.002)
    low, high = pre.at_rate(0.1 * pre.capacity), pre.at_rate(0.9 * pre.capacity)
    assert low is not None and high is not None
    assert low.ttft_mean_s < high.ttft_mean_s and high.ttft_p90_s > high.ttft_mean_s
    assert pre.at_rate(pre.capacity) is None
    assert pre.max_rate(pre.single_s + 0.002 - 1e-6) == 0.0


def _brute_force(w: InferenceWorkload, shapes: list, roles: tuple[str, ...]) -> float:
    """Every count vector within the pools' GPUs: the best objective (fewest GPUs / lowest price / most rate)."""
    cap = {p.name: p.healthy_gpus for p in TWO_POOLS.pools}
    ranges = [range(cap[s.pool] // s.gpus + 1) for s in shapes]
    best = -math.inf if w.objective == "max_rate" else math.inf
    for counts in itertools.product(*ranges):
        used: dict[str, int] = {}
        for n, s in zip(counts, shapes, strict=True):
            used[s.pool] = used.get(s.pool, 0) + n * s.gpus
        if any(used[k] > cap[k] for k in used):
            continue
        served = min(
            sum(n * math.floor(s.rate / 1e-4) for n, s in zip(counts, shapes, strict=True) if s.role == r)
            for r in roles
        )
        if w.objective == "max_rate":
            best = max(best, served * 1e-4)
            continue
        if served * 1e-4 < (w.rate or 0) - 1e-12:
            continue
        val = sum(
            n * (s.gpus if w.objective == "gpus" else s.price_per_hour) for n, s in zip(counts, shapes, strict=True)
        )
        best = min(best, val)
    return best


@pytest.mark.parametrize(("objective", "rate"), [("gpus", 30.0), ("cost", 30.0), ("max_rate", None)])
def test_fleet_equals_brute_force(objective: str, rate: float | None) -> None:
    """The CP-SAT fleet's objective equals exhaustive enumeration of replica counts over the same priced shapes
    (aggregated fleets; two pools)."""
    w = InferenceWorkload(
        prompt_len=1024, output_len=256, rate=rate, ttft_ms=800, tpot_ms=40, objective=objective, disaggregation="off"
    )
    space = SearchSpace(pins=parse_pins(["tp<=2", "pp=1"]))  # 4 shapes: 23,409 count vectors to enumerate
    res = plan(MODEL, TWO_POOLS, w, space, time_limit_s=20)
    assert res.status == "OPTIMAL" and res.fleet is not None
    shapes = FleetSearch(MODEL, TWO_POOLS, w, space).aggregated().shapes
    assert len(shapes) == 4  # dominance keeps one shape per (pool, GPUs)
    best = _brute_force(w, shapes, ("replica",))
    assert res.objective_value == pytest.approx(best, rel=1e-6)
    assert res.fleet.gpus <= sum(p.healthy_gpus for p in TWO_POOLS.pools)
    if rate is not None:
        assert res.fleet.capacity_rate >= rate


def test_cheaper_pool_wins_on_cost_and_explains_mode() -> None:
    w = InferenceWorkload(prompt_len=512, output_len=256, rate=5, tpot_ms=60, ttft_ms=2000, objective="cost")
    res = plan(MODEL, TWO_POOLS, w, time_limit_s=20)
    assert res.fleet is not None
    assert {g.shape.pool for g in res.fleet.groups} == {"a100"}  # A100 is half the price and meets a loose SLA
    assert res.fleet.why.startswith(res.fleet.mode)
    assert res.fleet.price_per_million_tokens is not None and res.fleet.price_per_million_tokens > 0


def test_disaggregated_fleet_has_both_roles_and_a_transfer() -> None:
    w = InferenceWorkload(
        prompt_len=8192, output_len=256, rate=4, tpot_ms=30, ttft_ms=3000, disaggregation="on", objective="gpus"
    )
    res = plan(MODEL, TWO_POOLS, w, time_limit_s=20)
    assert res.fleet is not None and res.fleet.mode == "disaggregated"
    assert {g.shape.role for g in res.fleet.groups} == {"prefill", "decode"}
    assert res.fleet.kv_transfer_s is not None and res.fleet.kv_transfer_s > 0


def test_unreachable_ttft_is_infeasible_with_the_bound() -> None:
    """TTFT below one prefill on the fastest GPU: INFEASIBLE naming the bound, not a timeout."""
    w = InferenceWorkload(prompt_len=32768, output_len=64, rate=1, ttft_ms=5, objective="gpus")
    res = plan(MODEL, TWO_POOLS, w, time_limit_s=20)
    assert res.status == "INFEASIBLE"
    assert res.explanation.infeasible is not None
    assert (
        "ttft_ms" in res.explanation.infeasible.detail
        and "relax ttft_ms to at least" in res.explanation.infeasible.detail
    )


def test_rate_beyond_the_pools_names_the_most_they_serve() -> None:
    w = InferenceWorkload(prompt_len=1024, output_len=512, rate=100_000, tpot_ms=50, objective="gpus")
    res = plan(MODEL, TWO_POOLS, w, time_limit_s=20)
    assert res.status == "INFEASIBLE"
    assert res.explanation.infeasible is not None
    detail = res.explanation.infeasible.detail
    assert detail.startswith("rate:") and "at most" in detail
    most = float(detail.split("at most ")[1].split(" ")[0])
    cap = plan(MODEL, TWO_POOLS, w.model_copy(update={"rate": None, "objective": "max_rate"}), time_limit_s=20)
    assert cap.objective_value == pytest.approx(most, rel=1e-3)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"rate": 0}, "rate"),
        ({"rate": -3}, "rate"),
        ({"ttft_ms": 0, "rate": 1, "objective": "gpus"}, "ttft_ms"),
        ({"tpot_ms": 1e9, "rate": 1, "objective": "gpus"}, "tpot_ms"),
        ({"objective": "gpus"}, "rate"),
        ({"rate": 2}, "objective"),
        ({"tpot_ms": 50}, "objective"),
        ({"objective": "max_rate", "rate": 3}, "rate"),
        ({"engine": "tgi"}, "engine"),
        ({"weight_dtype": "int3"}, "weight_dtype"),
    ],
)
def test_bad_serving_input_names_the_field(fields: dict, field: str) -> None:
    with pytest.raises(DomainError) as exc:
        build_inference(prompt_len=100, output_len=10, **fields)
    assert field in str(exc.value)


def test_cost_objective_needs_prices() -> None:
    unpriced = build_cluster(
        {"name": "x", "pools": [{"name": "p", "gpu": "H100-SXM-80GB", "nodes": 1, "gpus_per_node": 8}]}
    )
    w = InferenceWorkload(prompt_len=100, output_len=10, rate=1, objective="cost")
    with pytest.raises(DomainError) as exc:
        plan(MODEL, unpriced, w, time_limit_s=5)
    assert "price_per_gpu_hour" in str(exc.value)


def test_published_serving_rows() -> None:
    """At least 30 rows over 3 engines and 2 GPU families, each cited; the error figures the issue sets."""
    sources, records = load_serving_records()
    assert len(records) >= 30
    assert {r["engine"] for r in records} == {"vllm", "sglang", "trtllm"}
    assert {r["gpu"].split("-")[0] for r in records} >= {"A100", "H100"}
    for r in records:
        src = sources[r["source"]]
        assert src["repo"] and src["path"] and len(src["commit"]) == 40 and r["table"]
    # The figures the bounds were set on (issue 17's rows); the MoE attention-DP rows of issue 39 (marked `fit`)
    # have their own target below.
    first = {r["id"] for r in records if "fit" not in r}
    cases = [c for c in run_serving() if c.id in first]
    assert len(cases) >= 96
    errors = [abs(c.error) for c in cases]
    assert statistics.median(errors) <= 0.15
    # The bound on every figure; today 31.2% (SGLang's DeepSeek-V3 EP32 prefill at 1,024 tokens: -24.8%,
    # and the EP72 decode +28.6%).
    assert max(errors) <= 0.35
    # Every held-out figure names its reason.
    assert all(why for _, why in held_out_serving())


REGISTRY = json.loads((resources.files("optimizer.exports") / "export_options.json").read_text())
# The fleet exports' SLA: 4,096-token prompts at 3 requests/s within TPOT 40 ms and TTFT 3 s, FP8 KV, fewest GPUs.
FLEET_SLA: dict[str, Any] = dict(
    prompt_len=4096, output_len=256, rate=3, tpot_ms=40, ttft_ms=3000, kv_cache_dtype="fp8", objective="gpus"
)


@pytest.mark.parametrize("tool", ["vllm", "sglang", "trtllm"])
@pytest.mark.parametrize("disaggregation", ["off", "on"])
def test_fleet_exports_use_documented_options(tool: str, disaggregation: str) -> None:
    """Every option a fleet export emits is one the engine documents; the roles and limits are the plan's."""
    w = InferenceWorkload(**FLEET_SLA, engine=tool, disaggregation=disaggregation)
    res = plan(MODEL, TWO_POOLS, w, time_limit_s=20)
    assert res.fleet is not None
    exports = export_fleet(tool, MODEL, w, res.fleet, "meta-llama/Llama-3.1-8B")
    allowed = set(REGISTRY[tool]["options"])
    for e in exports:
        assert set(e.options) <= allowed, set(e.options) - allowed
    if disaggregation == "on":
        assert len(exports) == len(res.fleet.groups) + 1  # one per group plus the front end
        text = "\n".join(e.content for e in exports)
        role_flag = {"vllm": "NixlConnector", "sglang": "--disaggregation-mode prefill", "trtllm": "context_servers"}
        assert role_flag[tool] in text
    # pasted as served, every group's launch reaches its engine with all its flags (the front end: bash runs it)
    launcher = {"vllm": "vllm", "sglang": "python", "trtllm": "trtllm-serve"}[tool]
    for k, e in enumerate(exports):
        args = argv(e.script(), launcher)
        if k < len(res.fleet.groups):
            flags = flag_values(args[next(i for i, a in enumerate(args) if a.startswith("--")) :])
            assert list(flags) == [o for o in e.options if o.startswith("--")]
    first = res.fleet.groups[0].shape
    limit_flag = {"vllm": "--max-num-batched-tokens", "sglang": "--chunked-prefill-size", "trtllm": "--max_num_tokens"}
    assert f"{limit_flag[tool]} {first.max_batched_tokens}" in exports[0].content


def test_fleet_export_to_a_training_framework_is_an_error() -> None:
    w = InferenceWorkload(prompt_len=512, output_len=128, rate=1, objective="gpus")
    res = plan(MODEL, TWO_POOLS, w, time_limit_s=20)
    assert res.fleet is not None
    with pytest.raises(DomainError) as exc:
        export_fleet("megatron", MODEL, w, res.fleet)
    assert "vllm" in str(exc.value)


def test_every_published_serving_configuration_fits() -> None:
    """Each row's configuration holds its weights and at least the sequences it served (a static batch: all of
    them or, for a paged cache, at least one; continuous batching: at least one in the KV cache; a decode instance:
    its whole batch)."""
    from accuracy.serving_runs import record_cluster, record_config, record_workload

    _, records = load_serving_records()
    for rec in records:
        model = load_model_preset(rec["model"])
        cluster, w, cfg = record_cluster(rec), record_workload(rec), record_config(rec)
        decode_only = rec["mode"] == "decode_batch"
        load = ReplicaLoad(model, cluster, w, cfg, validate(model, cluster, w, cfg), decode_only=decode_only)
        # A decode instance held its batch on every attention-DP rank at once (DeepSeek-V3 EP72: 256 per rank).
        served = w.batch * cfg.dp if decode_only else 1
        assert load.max_decoding >= served, (rec["id"], load.kv_tokens, load.max_decoding)


def test_length_spread_costs_capacity() -> None:
    """Spread output lengths lengthen the running sequences' context (length bias) and spread prompts lengthen the
    prefill queue (Pollaczek-Khinchine): both lower the rate a replica sustains within the same targets."""
    fixed = InferenceWorkload(prompt_len=1024, output_len=256)
    spread_out = fixed.model_copy(update={"output_len_cv": 1.0})
    spread_in = fixed.model_copy(update={"prompt_len_cv": 1.5})
    r0, r_out, r_in = replica(fixed), replica(spread_out), replica(spread_in)
    assert r_out.ctx == pytest.approx(1024 + 256)  # P + O (1 + 1) / 2
    assert r_out.max_rate(tpot_s=0.02) < r0.max_rate(tpot_s=0.02)
    p0, p_in = r0.at_rate(r0.max_rate() * 0.8), r_in.at_rate(r0.max_rate() * 0.8)
    assert p0 is not None and p_in is not None and p_in.ttft_mean_s > p0.ttft_mean_s


def test_sla_search_stops_as_unknown_and_reports_progress() -> None:
    """Cancelled or out of time before a fleet is found: UNKNOWN with the reason, never INFEASIBLE; progress is
    reported per priced shape."""
    w = InferenceWorkload(prompt_len=2000, output_len=500, rate=5, tpot_ms=50, objective="gpus")
    seen: list[int] = []
    res = plan(MODEL, TWO_POOLS, w, time_limit_s=20, progress=lambda p: seen.append(p.solved), cancelled=lambda: True)
    assert res.status == "UNKNOWN" and "cancelled" in res.explanation.summary
    assert seen == [1]
    big = load_model_preset("deepseek-v3")
    cluster = build_cluster(
        {"name": "x", "pools": [{"name": "h", "gpu": "H100-SXM-80GB", "nodes": 16, "gpus_per_node": 8}]}
    )
    res = plan(big, cluster, w.model_copy(update={"precision": "fp8"}), time_limit_s=0.1)
    assert res.status == "UNKNOWN" and "time limit" in res.explanation.summary


def test_sglang_runs_wide_ep_only_disaggregated() -> None:
    """DeepSeek-V3 on 12 H100 nodes under SGLang: wide EP with DP attention appears only in prefill/decode
    instances (DeepEP's two dispatch modes cannot share a device group under DP attention)."""
    big = load_model_preset("deepseek-v3")
    cluster = build_cluster(
        {
            "name": "x",
            "pools": [
                {
                    "name": "h",
                    "gpu": "H100-SXM-80GB",
                    "nodes": 12,
                    "gpus_per_node": 8,
                    "inter_node": {"nics_per_node": 8, "gbits_per_s": 400},
                }
            ],
        }
    )
    w = InferenceWorkload(
        prompt_len=2000,
        output_len=1000,
        objective="max_rate",
        tpot_ms=100,
        ttft_ms=5000,
        precision="fp8",
        engine="sglang",
    )
    search = FleetSearch(big, cluster, w, SearchSpace())
    assert all(not (c.dp > 1 and c.ep > 1) for _, c in search.candidates(aggregated=True))
    assert any(c.dp > 1 and c.ep > 1 for _, c in search.candidates())
    res = plan(big, cluster, w, time_limit_s=60)
    assert res.fleet is not None and res.fleet.mode == "disaggregated"
    assert any(g.shape.ep > 1 and g.shape.dp > 1 for g in res.fleet.groups)


@pytest.mark.parametrize("scenario", SERVING_SCENARIOS, ids=[s.name for s in SERVING_SCENARIOS])
def test_serving_picks_look_like_the_published_deployments(scenario: ServingScenario) -> None:
    """The planner's fleet on well-known public deployments: the same kind of layout experts ran, and their
    throughput within 25% (DeepSeek-V3: per decode node; dense: per GPU)."""
    model, cluster = load_model_preset(scenario.model), resolve_cluster(scenario.cluster)
    w = InferenceWorkload.model_validate({**scenario.workload, "objective": "max_rate"})
    res = plan(model, cluster, w, time_limit_s=60)
    assert res.status == "OPTIMAL" and res.fleet is not None
    f = res.fleet
    if "decode_node" in scenario.published_rate:
        assert f.mode == "disaggregated"
        assert all(g.shape.ep >= 16 and g.shape.dp > 1 for g in f.groups)  # wide EP with DP attention
        decode_nodes = sum(g.count * g.shape.gpus for g in f.groups if g.shape.role == "decode") / 8
        per_node = f.served_rate * w.output_len / decode_nodes
        assert per_node == pytest.approx(scenario.published_rate["decode_node"], rel=0.25)
    else:
        assert all(g.shape.tp <= 4 and g.shape.pp == 1 for g in f.groups)  # small TP replicas, no PP
        assert f.output_tokens_per_s_per_gpu == pytest.approx(scenario.published_rate["gpu"], rel=0.25)


def test_fleet_keeps_to_the_gpu_budget() -> None:
    w = InferenceWorkload(prompt_len=1024, output_len=256, tpot_ms=40, objective="max_rate")
    full = plan(MODEL, TWO_POOLS, w, time_limit_s=20)
    capped = plan(MODEL, TWO_POOLS, w, SearchSpace(max_gpus=5), time_limit_s=20)
    assert full.fleet is not None and capped.fleet is not None
    assert full.fleet.gpus > 5 and capped.fleet.gpus <= 5
    assert capped.fleet.capacity_rate < full.fleet.capacity_rate


def test_vllm_multi_step_rows_wait_for_the_scheduling_group() -> None:
    """The vLLM 0.6 rows ran --num-scheduler-steps 10 and that version's max_num_seqs 256: their TTFT is the
    model's TTFT plus (10 - 1) / 2 decode iterations (a request waits for the running group to end), and the
    offline row runs at most 256 sequences."""
    from accuracy.serving_runs import predict_serving

    _, records = load_serving_records()
    by_id = {r["id"]: r for r in records}
    rec = by_id["vllm_sharegpt_llama-3-8b_a100_tp1_rps4"]
    assert rec["scheduler_steps"] == 10 and rec["max_seqs"] == 256
    single = {c.metric: c.predicted for c in predict_serving({**rec, "scheduler_steps": 1})}
    grouped = {c.metric: c.predicted for c in predict_serving(rec)}
    assert grouped["tpot_s"] == pytest.approx(single["tpot_s"])
    assert grouped["ttft_s"] == pytest.approx(single["ttft_s"] + 4.5 * single["tpot_s"])
    offline = by_id["vllm_sharegpt_llama-3-70b_h100_tp4_offline"]
    capped = predict_serving(offline)[0].predicted
    default = predict_serving({k: v for k, v in offline.items() if k != "max_seqs"})[0].predicted
    assert capped < 0.8 * default  # the engine table's current default (1024 on H100) runs 4x the sequences


def test_redundant_experts_are_a_serving_knob_that_lets_ep_exceed_the_expert_divisors() -> None:
    """DeepSeek-V3 decode ran EP72: 256 experts + 32 redundant replicas, 4 per rank (LMSYS large-scale EP blog).
    The replicas cost memory; training frameworks have no such knob; exports name the engines' options."""
    ds = load_model_preset("deepseek-v3")
    pool = {"name": "h", "gpu": "H100-SXM-80GB", "nodes": 9, "gpus_per_node": 8}
    cluster = build_cluster({"name": "nine", "pools": [pool]})
    w = InferenceWorkload(prompt_len=2000, output_len=1, batch=256, precision="fp8", engine="sglang")
    plain = ParallelConfig(tp=1, dp=72, ep=72, etp=1)
    with pytest.raises(DomainError) as exc:
        validate(ds, cluster, w, plain)
    assert exc.value.field == "config.ep" and "256" in str(exc.value)
    wide = plain.model_copy(update={"redundant_experts": 32})
    validate(ds, cluster, w, wide)
    with pytest.raises(DomainError) as exc:
        validate(ds, cluster, w, plain.model_copy(update={"redundant_experts": 8}))
    assert "redundant_experts=8" in str(exc.value)  # 264 experts over 72 ranks
    # Memory: each rank holds 288 / 72 = 4 experts per MoE layer, 288/256 of the routed weights over 72.
    _, experts_64, _ = stage_params(ds, ParallelConfig(tp=1, dp=64, ep=64, etp=1), 0, 58, False, False)
    _, experts_72, _ = stage_params(ds, wide, 0, 58, False, False)
    assert experts_72 == pytest.approx(experts_64)
    # Not a training knob; a dense model or ep = 1 has nothing to replicate.
    with pytest.raises(DomainError) as exc:
        validate(ds, cluster, TrainingWorkload(global_batch_size=576, seq_len=4096), wide)
    assert exc.value.field == "config.redundant_experts"
    with pytest.raises(DomainError) as exc:
        validate(ds, cluster, w, ParallelConfig(tp=8, redundant_experts=8))
    assert exc.value.field == "config.redundant_experts"
    # Exports: SGLang and vLLM name their load balancer's options; TensorRT-LLM's are not in the checked list.
    for tool in ("sglang", "vllm"):
        e = export(tool, ds, w, wide, "deepseek-ai/DeepSeek-V3")
        assert set(e.options) <= set(REGISTRY[tool]["options"]) and "--enable-eplb" in e.content
        # vLLM 0.11.0 deprecates --num-redundant-experts ("will be removed in v0.12.0"): the count is in --eplb-config
        assert (
            "--ep-num-redundant-experts 32" if tool == "sglang" else "--eplb-config '{\"num_redundant_experts\": 32}'"
        ) in e.content
    with pytest.raises(DomainError) as exc:
        export("trtllm", ds, w, wide, "deepseek-ai/DeepSeek-V3")
    assert exc.value.field == "export.redundant_experts"


def test_decode_attention_adds_to_compute_bound_gemms() -> None:
    """Each kernel on its own roofline, one after another: at 1,400 decoding sequences of Llama-3-8B on an A100 the
    GEMMs are compute-bound while the paged attention is bound by its KV reads, so longer contexts lengthen the
    iteration by about their KV read time. A per-layer roofline (max of all FLOPs and all bytes) hid the attention
    under the GEMMs and put SGLang's offline ShareGPT run 49% too fast."""
    model = load_model_preset("llama-3-8b")
    cluster = resolve_cluster("dgx-a100")
    w = InferenceWorkload(prompt_len=1, output_len=1, batch=1, engine="sglang")
    cfg = ParallelConfig()
    layout = validate(model, cluster, w, cfg)
    gpu = cluster.compute_gpu(layout.stage_pools[0])
    seqs, ctx = 1400, 320

    def iteration(context: int) -> float:
        t, _ = stage_time(
            model, cluster, w, cfg, layout.stage_pools[0], 0, model.num_layers, StepWork.decode(seqs, context), True
        )
        return t

    kv = seqs * ctx * model.num_layers * kv_bytes_per_token_per_layer(model, 1, 2)
    assert iteration(ctx) - iteration(1) >= 0.9 * hbm_time(gpu, kv)


def _moe_attention_dp_errors(split: str) -> list[float]:
    _, records = load_serving_records()
    rows = [r for r in records if r.get("fit") == split]
    return [abs(c.error) for r in rows for c in predict_serving_rows(r)]


def predict_serving_rows(rec: dict[str, Any]) -> list[Any]:
    from accuracy.serving_runs import predict_serving

    return predict_serving(rec)


def test_moe_attention_dp_rows_are_priced_within_their_measured_bound() -> None:
    """Issue 39's MoE attention-DP rows (Qwen3-235B 8 x H200 / H100 attention DP 8 x EP 8, DeepSeek-R1 8 x H200):
    today's held-out median |error| is 39.6% (max 157%, Qwen3 H100 128/4096); this pins it so it cannot regress
    while the 20% target below stays open."""
    held = _moe_attention_dp_errors("held_out")
    assert len(held) == 8
    assert statistics.median(held) <= 0.45


@pytest.mark.xfail(strict=True, reason="issue 39 target not reached: held-out median 39.6%, 2 of 8 within 20%")
def test_moe_attention_dp_rows_within_20_percent() -> None:
    errors = _moe_attention_dp_errors("held_out") + _moe_attention_dp_errors("in_sample")
    assert max(errors) <= 0.20


def test_an_aggregated_sla_plan_reports_its_replicas_latency_percentiles() -> None:
    """The SLA search and the latency simulation price the same engine step: the planned replica, simulated at its
    share of the served rate, keeps its p50 TPOT within the target it was planned for (issue 39)."""
    w = InferenceWorkload(
        prompt_len=512, output_len=128, rate=20, tpot_ms=40, ttft_ms=1000, objective="gpus", disaggregation="off"
    )
    res = plan(MODEL, TWO_POOLS, w, time_limit_s=20)
    assert res.fleet is not None and res.plan is not None
    ll = res.plan.estimate.load_latency
    assert ll is not None and ll.rate_per_replica is not None and ll.rate_per_replica > 0
    assert ll.ttft.p50_s <= ll.ttft.p90_s <= ll.ttft.p99_s
    assert ll.tpot.p50_s <= 0.040
