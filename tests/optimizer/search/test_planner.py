"""The CP-SAT planner against the exhaustive oracle, the estimator, pins, infeasibility and warm start."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optimizer.costmodel.estimate import estimate
from optimizer.errors import DomainError
from optimizer.search.oracle import oracle_plan, oracle_ranked
from optimizer.search.planner import has_plan, plan
from optimizer.search.space import SearchSpace, parse_pins
from optimizer.spec.cluster_loading import build_cluster, load_cluster_preset
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.workload import InferenceWorkload, TrainingWorkload


def tiny_model(layers: int = 6, hidden: int = 1024, heads: int = 8, kv: int = 8, vocab: int = 32000) -> ModelSpec:
    return ModelSpec(
        name="tiny",
        num_layers=layers,
        hidden_size=hidden,
        ffn_hidden_size=4 * hidden,
        num_attention_heads=heads,
        num_kv_heads=kv,
        vocab_size=vocab,
    )


def tiny_moe(layers: int = 4, first_k_dense: int = 1) -> ModelSpec:
    return ModelSpec.model_validate(
        {
            "name": "tiny-moe",
            "num_layers": layers,
            "hidden_size": 1024,
            "ffn_hidden_size": 4096,
            "num_attention_heads": 8,
            "num_kv_heads": 8,
            "vocab_size": 32000,
            "moe": {
                "num_experts": 4,
                "top_k": 2,
                "expert_ffn_hidden_size": 2048,
                "first_k_dense": first_k_dense,
            },
        }
    )


def small_cluster(
    memory_gib: float,
    nodes: int = 1,
    gpn: int = 4,
    second: float | None = None,
    pcie: bool = False,
    prices: tuple[float | None, float | None] = (None, None),
) -> ClusterSpec:
    gpus = [
        {
            "name": "G",
            "bf16_tflops": 300,
            "memory_gib": memory_gib,
            "memory_tbps": 2.0,
            "scaleup_gbytes_per_s": 300,
            "scaleup_domain": gpn,
            "family": "ampere",
        }
    ]
    pools = [
        {
            "name": "a",
            "gpu": "G",
            "nodes": nodes,
            "gpus_per_node": gpn,
            "inter_node": {"nics_per_node": 2, "gbits_per_s": 200},
        }
    ]
    if pcie:
        pools[0]["intra_node"] = {"kind": "pcie", "pcie_gen": 4}
    if prices[0] is not None:
        pools[0]["price_per_gpu_hour"] = prices[0]
    if second is not None:
        gpus.append(
            {
                "name": "S",
                "bf16_tflops": 150,
                "memory_gib": second,
                "memory_tbps": 1.0,
                "scaleup_gbytes_per_s": 0,
                "scaleup_domain": 1,
                "family": "ada",
            }
        )
        pools.append(
            {
                "name": "b",
                "gpu": "S",
                "nodes": 1,
                "gpus_per_node": gpn,
                "intra_node": {"kind": "pcie", "pcie_gen": 4},
                "inter_node": {"nics_per_node": 1, "gbits_per_s": 100},
            }
        )
    if second is not None and prices[1] is not None:
        pools[1]["price_per_gpu_hour"] = prices[1]
    return build_cluster({"name": "small", "pools": pools, "gpu_types": gpus})


SMALL_SPACE = SearchSpace(pins=parse_pins(["mbs=1,2", "vp<=2", "cp=1"]))


def check_against_oracle(model: ModelSpec, cluster: ClusterSpec, w: TrainingWorkload, space: SearchSpace) -> None:
    got = plan(model, cluster, w, space, top_k=1, time_limit_s=120, interval_rule=False)
    want = oracle_plan(model, cluster, w, space)
    if want is None:
        assert got.status == "INFEASIBLE" and got.plan is None
        return
    assert got.status == "OPTIMAL"
    assert got.objective_value == pytest.approx(want[0], abs=1e-6)
    assert got.plan is not None
    # The plan's objective is `estimate` of the chosen configuration, to within CP-SAT's integer nanoseconds.
    assert estimate(model, cluster, w, got.plan.config).step_time_s == pytest.approx(got.objective_value, abs=1e-6)


@pytest.mark.parametrize(("memory", "gbs"), [(2.0, 8), (3.0, 16), (8.0, 8), (1.6, 4)])
def test_fixed_scenarios_equal_oracle(memory: float, gbs: int) -> None:
    check_against_oracle(
        tiny_model(), small_cluster(memory), TrainingWorkload(global_batch_size=gbs, seq_len=2048), SMALL_SPACE
    )


def test_heterogeneous_equals_oracle() -> None:
    cluster = small_cluster(2.5, gpn=2, second=3.0)
    check_against_oracle(
        tiny_model(layers=4), cluster, TrainingWorkload(global_batch_size=8, seq_len=2048), SMALL_SPACE
    )


@pytest.mark.parametrize(("memory", "gbs", "first_k_dense"), [(2.0, 8, 1), (4.0, 8, 0), (1.6, 4, 1)])
def test_moe_equals_oracle(memory: float, gbs: int, first_k_dense: int) -> None:
    # Dense and MoE layers (experts split by EP), the leading dense layer on stage 0: the planner's per-layer-type
    # bounds (integer layers, staggered in-flight memory) must never cut the optimum.
    check_against_oracle(
        tiny_moe(first_k_dense=first_k_dense),
        small_cluster(memory),
        TrainingWorkload(global_batch_size=gbs, seq_len=2048),
        SearchSpace(pins=parse_pins(["mbs=1,2", "vp<=2", "cp=1"])),
    )


@pytest.mark.parametrize(("memory", "second"), [(2.0, None), (2.5, 3.0)])
def test_top_k_equal_the_oracles_best_signatures(memory: float, second: float | None) -> None:
    # The runners-up are the best plans of the next-best (tp, pp, dp, cp, ep): the search's stopping rule (the
    # K-th best found beats every open bound) must prove all K, not only the first.
    model, cluster = tiny_model(layers=4), small_cluster(memory, gpn=2 if second else 4, second=second)
    w = TrainingWorkload(global_batch_size=8, seq_len=2048)
    got = plan(model, cluster, w, SMALL_SPACE, top_k=3, time_limit_s=120, interval_rule=False)
    want = oracle_ranked(model, cluster, w, SMALL_SPACE)[:3]
    assert got.status == "OPTIMAL" and got.objective_value is not None and len(want) == 3
    objectives = [got.objective_value] + [got.objective_value + a.delta_s for a in got.alternatives]
    assert objectives == pytest.approx([v[0] for v in want], abs=1e-6)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(
    moe=st.booleans(),
    memory=st.floats(1.6, 8.0),
    gbs=st.sampled_from([8, 16, 32]),
    nodes=st.sampled_from([1, 2]),
    gpn=st.sampled_from([2, 4]),
    pcie=st.booleans(),
)
def test_compute_bound_scenarios_equal_oracle(
    moe: bool, memory: float, gbs: int, nodes: int, gpn: int, pcie: bool
) -> None:
    # Long sequences and many micro-batches make the pipeline term dominate, so the candidate bounds (integer
    # layers, hops, staggered in-flight memory) come within a few percent of the optimum: an invalid bound
    # would cut it here.
    check_against_oracle(
        tiny_moe() if moe else tiny_model(layers=4),
        small_cluster(memory, nodes=nodes, gpn=gpn, pcie=pcie),
        TrainingWorkload(global_batch_size=gbs, seq_len=4096),
        SMALL_SPACE,
    )


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    layers=st.integers(2, 6),
    hidden=st.sampled_from([512, 1024]),
    memory=st.floats(1.4, 6.0),
    gbs=st.sampled_from([2, 4, 8]),
    gpn=st.sampled_from([2, 4]),
)
def test_random_scenarios_equal_oracle(layers: int, hidden: int, memory: float, gbs: int, gpn: int) -> None:
    check_against_oracle(
        tiny_model(layers=layers, hidden=hidden),
        small_cluster(memory, gpn=gpn),
        TrainingWorkload(global_batch_size=gbs, seq_len=2048),
        SMALL_SPACE,
    )


def test_plan_matches_estimate_at_scale() -> None:
    m = load_model_preset("llama-3-70b")
    c = load_cluster_preset("dgx-h100:8")
    w = TrainingWorkload(global_batch_size=512, seq_len=4096)
    r = plan(m, c, w, top_k=3, time_limit_s=60)
    assert r.status == "OPTIMAL" and r.plan is not None
    assert r.plan.estimate.step_time_s == pytest.approx(r.objective_value, abs=1e-6)
    # The interval rule may pick a plan slower than the proven optimum: the bound is the optimum's.
    assert r.lower_bound is not None and r.lower_bound <= r.objective_value + 1e-9
    assert len(r.alternatives) == 2
    for alt in r.alternatives:
        assert alt.differs_in
        # a runner-up faster than the plan is one the intervals cannot order, or one at risk of running out of memory
        assert alt.delta_s >= 0 or alt.indistinguishable or any(s.oom_risk for s in alt.estimate.stages)
        assert alt.estimate.step_time_s == pytest.approx(r.objective_value + alt.delta_s, abs=1e-6)
    assert r.explanation.binding and r.explanation.versus_runner_up


def test_pins_are_respected() -> None:
    m = load_model_preset("llama-3-70b")
    c = load_cluster_preset("dgx-h100:8")
    w = TrainingWorkload(global_batch_size=512, seq_len=4096)
    r = plan(m, c, w, SearchSpace(pins=parse_pins(["tp=4", "pp>=2", "recompute=full"]), max_gpus=48), time_limit_s=60)
    assert r.plan is not None
    cfg = r.plan.config
    assert cfg.tp == 4 and cfg.pp >= 2 and cfg.recompute == "full" and cfg.gpus <= 48


def test_contradicting_pins_named() -> None:
    m = load_model_preset("llama-3-70b")
    c = load_cluster_preset("dgx-h100:2")
    w = TrainingWorkload(global_batch_size=64, seq_len=4096)
    with pytest.raises(DomainError) as exc:
        plan(m, c, w, SearchSpace(pins=parse_pins(["tp=3"])))
    assert "tp=3" in str(exc.value) and "num_attention_heads=64" in str(exc.value)
    with pytest.raises(DomainError) as exc:
        parse_pins(["pp>=8", "pp<=4"])
    assert "pp>=8" in str(exc.value) and "pp<=4" in str(exc.value)


def test_time_limit_bounds() -> None:
    m, c = tiny_model(), small_cluster(4.0)
    w = TrainingWorkload(global_batch_size=4, seq_len=2048)
    for bad in (0.05, 10_000.0):
        with pytest.raises(DomainError) as exc:
            plan(m, c, w, time_limit_s=bad)
        assert exc.value.field == "time_limit"


def test_no_healthy_gpu() -> None:
    c = build_cluster(
        {
            "name": "x",
            "pools": [{"name": "p", "gpu": "H100", "nodes": 1, "gpus_per_node": 8, "node_states": {"p-000": "failed"}}],
        }
    )
    with pytest.raises(DomainError) as exc:
        plan(tiny_model(), c, TrainingWorkload(global_batch_size=4, seq_len=2048))
    assert "no healthy GPU" in str(exc.value)


def test_infeasible_names_resource_and_fix() -> None:
    m = load_model_preset("llama-3-70b")
    c = load_cluster_preset("dgx-h100:2")
    w = TrainingWorkload(global_batch_size=64, seq_len=4096)
    r = plan(m, c, w, time_limit_s=60)
    assert r.status == "INFEASIBLE" and r.plan is None
    report = r.explanation.infeasible
    assert report is not None and report.resource == "memory"
    assert any("more GPUs" in s.change for s in report.suggestions)


def test_warm_start_reaches_same_optimum() -> None:
    m = load_model_preset("llama-3-70b")
    c = load_cluster_preset("dgx-h100:8")
    w = TrainingWorkload(global_batch_size=512, seq_len=4096)
    first = plan(m, c, w, time_limit_s=60)
    assert first.plan is not None
    again = plan(m, c, w, time_limit_s=60, warm_start=first.plan.config)
    assert again.objective_value == pytest.approx(first.objective_value)
    assert again.candidates_solved <= first.candidates_solved + 1


def test_inference_plan() -> None:
    m = load_model_preset("llama-2-70b")
    r = plan(m, load_cluster_preset("dgx-h100"), InferenceWorkload(prompt_len=2048, output_len=256, batch=8))
    assert r.status == "OPTIMAL" and r.plan is not None
    assert r.plan.estimate.tpot_s == pytest.approx(r.objective_value, abs=1e-6)
    assert r.plan.config.tp == 8  # the latency-optimal plan on one NVLink node uses all of it for TP


def test_infeasible_suggests_the_largest_batch_that_fits() -> None:
    # GPipe keeps every micro-batch in flight: with dp and mbs pinned, activations grow with the batch, so a
    # smaller batch is the fix; the suggestion is the largest halving that fits, and it really does fit.
    m, c = tiny_model(layers=4), small_cluster(3.0)
    space = SearchSpace(pins=parse_pins(["pp=2", "schedule=gpipe", "dp=1", "mbs=1", "tp=1", "cp=1"]))
    # GPipe: not in Megatron. The cluster is sized for a fused loss; torchtitan's unfused fp32 logits alone
    # would not fit at any batch.
    w = TrainingWorkload(global_batch_size=512, seq_len=4096, framework="torchtitan", fused_loss=True)
    r = plan(m, c, w, space, time_limit_s=30)
    assert r.status == "INFEASIBLE" and r.explanation is not None and r.explanation.infeasible is not None
    changes = [s.change for s in r.explanation.infeasible.suggestions]
    batch = [x for x in changes if x.startswith("smaller global batch")]
    assert len(batch) == 1, changes
    gbs = int(batch[0].split(": ")[1].split()[0])
    assert plan(m, c, w.model_copy(update={"global_batch_size": gbs}), space, time_limit_s=30).plan is not None
    assert plan(m, c, w.model_copy(update={"global_batch_size": gbs * 2}), space, time_limit_s=30).plan is None


@pytest.mark.parametrize(("second", "prices"), [(None, (2.0, None)), (3.0, (4.0, 1.0)), (3.0, (1.0, 4.0))])
def test_cost_objective_equals_oracle(second: float | None, prices: tuple[float, float | None]) -> None:
    # Price per step = step time x each stage's GPUs at its pool's price: the planner's proven optimum equals the
    # exhaustive oracle's under the same objective, and the reported price is that of the plan.
    model = tiny_model(layers=4)
    cluster = small_cluster(2.5, gpn=2 if second else 4, second=second, prices=prices)
    w = TrainingWorkload(global_batch_size=8, seq_len=2048, objective="cost")
    got = plan(model, cluster, w, SMALL_SPACE, top_k=1, time_limit_s=120, interval_rule=False)
    want = oracle_plan(model, cluster, w, SMALL_SPACE)
    assert want is not None and got.status == "OPTIMAL" and got.objective == "price_per_step"
    assert got.objective_value == pytest.approx(want[0], rel=1e-6)
    assert got.price_per_step == pytest.approx(got.objective_value, rel=1e-6)


def test_cost_objective_trades_time_for_price() -> None:
    # Two nodes at a price: the fastest plan uses all 8 GPUs; the cheapest per step may use fewer. Each is
    # optimal for its own objective, so neither beats the other on the other's.
    model, cluster = tiny_model(layers=4), small_cluster(2.5, nodes=2, prices=(2.0, None))
    fast = plan(model, cluster, TrainingWorkload(global_batch_size=8, seq_len=2048), SMALL_SPACE, time_limit_s=60)
    cheap = plan(model, cluster, TrainingWorkload(global_batch_size=8, seq_len=2048, objective="cost"), SMALL_SPACE)
    assert fast.plan is not None and cheap.plan is not None
    assert fast.price_per_step is not None and cheap.price_per_step is not None
    assert cheap.price_per_step <= fast.price_per_step * (1 + 1e-9)
    assert fast.plan.estimate.step_time_s <= cheap.plan.estimate.step_time_s * (1 + 1e-9)


def test_cost_objective_needs_prices() -> None:
    cluster = small_cluster(2.5, gpn=2, second=3.0, prices=(1.0, None))
    with pytest.raises(DomainError) as exc:
        plan(tiny_model(), cluster, TrainingWorkload(global_batch_size=8, seq_len=2048, objective="cost"))
    assert exc.value.field == "workload.objective" and "b" in str(exc.value)


@pytest.mark.parametrize("moe", [False, True])
def test_layout_count_equals_the_oracles_enumeration(moe: bool) -> None:
    # The benchmark's lower bound on the oracle's work counts layouts by DP; it must equal what the oracle
    # enumerates on one pool.
    from optimizer.search.candidates import TrainingSpace
    from optimizer.search.oracle import _layouts, layout_count
    from optimizer.spec.parallel_config import ParallelConfig

    model = tiny_moe(layers=5) if moe else tiny_model(layers=6)
    ts = TrainingSpace(
        model, small_cluster(4.0, gpn=8), TrainingWorkload(global_batch_size=8, seq_len=2048), SMALL_SPACE
    )
    for pp, vp in [(1, 1), (2, 1), (3, 1), (4, 1), (5, 1), (2, 2), (3, 2)]:
        if model.num_layers % vp or pp * vp > model.num_layers:
            continue
        c = ParallelConfig(pp=pp, vp=vp, schedule="interleaved-1f1b" if vp > 1 else "1f1b")
        assert layout_count(ts, c) == sum(1 for _ in _layouts(ts, c)), (pp, vp)


def test_warm_start_on_several_pools_solves_the_previous_structure_first() -> None:
    """A re-plan on a heterogeneous cluster: the previous plan's pool structure is solved first with its layout
    as the hint, the other structures are queued as in any search; the optimum is the same."""
    model, cluster = tiny_model(layers=4), small_cluster(2.5, gpn=2, second=3.0)
    w = TrainingWorkload(global_batch_size=8, seq_len=2048)
    first = plan(model, cluster, w, SMALL_SPACE, time_limit_s=60)
    assert first.status == "OPTIMAL" and first.plan is not None
    again = plan(model, cluster, w, SMALL_SPACE, time_limit_s=60, warm_start=first.plan.config)
    assert again.status == "OPTIMAL"
    assert again.objective_value == pytest.approx(first.objective_value)


def test_one_solve_with_pool_variables_equals_the_best_structure() -> None:
    """StageModel.solve (one CP-SAT model, pools as variables) and the planner's decomposition (the best of the
    pool-block structures, each solved with its pools fixed) agree on every candidate of a two-pool cluster."""
    from optimizer.search.candidates import TrainingSpace
    from optimizer.search.stage_model import StageModel

    model, cluster = tiny_model(layers=4), small_cluster(2.5, gpn=2, second=3.0)
    ts = TrainingSpace(model, cluster, TrainingWorkload(global_batch_size=8, seq_len=2048), SMALL_SPACE)
    compared = 0
    for cand in list(ts.all_candidates())[:40]:
        sm = StageModel(ts, cand)
        if sm.Q < 2:
            continue
        whole = sm.solve(30.0)
        parts = [sm.solve_structure(30.0, None, fixed) for _, fixed in sm.structures()]
        best = min((p.objective_s for p in parts if p.layers), default=float("inf"))
        assert whole.objective_s == pytest.approx(best) if whole.layers else best == float("inf"), cand.config
        compared += bool(whole.layers)
    assert compared >= 5


def test_the_oracles_pool_blocks_are_every_contiguous_assignment() -> None:
    """The oracle builds its pool assignments block by block; they are exactly the assignments of all
    pools^stages whose pools each form one contiguous block, in the same (lexicographic) order."""
    import itertools

    from optimizer.search.oracle import contiguous_blocks

    def contiguous(a: tuple[int, ...]) -> bool:
        blocks = [x for i, x in enumerate(a) if i == 0 or a[i - 1] != x]
        return len(blocks) == len(set(blocks))

    for pools in (1, 2, 3):
        for stages in range(1, 7):
            every = [a for a in itertools.product(range(pools), repeat=stages) if contiguous(a)]
            assert list(contiguous_blocks(pools, stages)) == every, (pools, stages)


def test_a_model_far_too_large_gets_the_nodes_that_fit_it() -> None:
    """Llama 3.1 405B on one node of A100-40GB: 16x the node was the largest probed, so the answer had no
    suggestion at all (issue 48 §4). The probe starts at the nodes the fully sharded states need; the suggested
    count fits, and the count below the states' own bound cannot."""
    m = load_model_preset("llama-3.1-405b")
    doc = load_cluster_preset("dgx-a100").model_dump()
    doc["pools"][0]["gpu"] = "A100-SXM-40GB"
    c = ClusterSpec.model_validate(doc)
    w = TrainingWorkload(global_batch_size=64, seq_len=4096)
    r = plan(m, c, w, time_limit_s=30)
    assert r.status == "INFEASIBLE" and r.explanation.infeasible is not None
    more = [s for s in r.explanation.infeasible.suggestions if s.change.startswith("more GPUs")]
    assert len(more) == 1, r.explanation.infeasible.suggestions
    nodes = int(more[0].detail.split(" x ")[0])
    assert nodes * 8 * 40 * 2**30 >= m.num_parameters * 16  # at least the states' own bound: 16 B per parameter
    doc["pools"][0]["nodes"] = nodes
    assert has_plan(m, ClusterSpec.model_validate(doc), w, SearchSpace(), time_limit_s=30)
