"""The next measurement: what would narrow a target's predicted step time most per GPU-hour [issue 33 §3]."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from accuracy.synthetic_fit import random_configs, synthetic_points
from optimizer.calibration.fit import PRIOR_SPREAD, RUN_SPREAD, TIME_CONSTANTS, ConstantFit, fit_calibration
from optimizer.calibration.next_measurement import (
    NextMeasurement,
    NextMeasurementRequest,
    Posterior,
    ShortRun,
    config_words,
    next_measurement,
    posterior_from_report,
    prior_posterior,
    rank_runs,
    run_spread_of,
    spread_after,
    step_constants,
)
from optimizer.errors import DomainError
from optimizer.spec.calibration import ClusterCalibration, PoolCalibration
from optimizer.spec.cluster_loading import load_cluster_preset
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import TrainingWorkload

MODEL = load_model_preset("llama-3-70b")
CLUSTER = load_cluster_preset("dgx-h100:8")
POOL = CLUSTER.pools[0].name
W = TrainingWorkload(global_batch_size=256, seq_len=4096)
# ZeRO-3 gathers across 8 nodes: about 90% of the step moves with the NIC bandwidth.
NETWORK_BOUND = ParallelConfig(tp=8, pp=1, dp=8, zero_stage=3, recompute="full", sequence_parallel=True)
# Data parallel with full recompute: about 85% of the step moves with the GEMM rate.
COMPUTE_BOUND = ParallelConfig(tp=1, pp=1, dp=64, zero_stage=3, recompute="full")
# tp8 inside each node, 4 stages, 2 replicas: mostly compute, then tensor-parallel traffic over NVLink.
STAGED = ParallelConfig(tp=8, pp=4, dp=2, zero_stage=1, sequence_parallel=True)


def _ask(config: ParallelConfig, posterior: Posterior | None = None, **kw: object) -> NextMeasurement:
    req = NextMeasurementRequest(
        model=MODEL,
        cluster=CLUSTER,
        workload=W,
        config=config,
        posterior=posterior or prior_posterior(None, [POOL]),
        run_spread=RUN_SPREAD,
        **kw,
    )
    return next_measurement(req)


def test_a_network_bound_target_asks_for_the_network_test_first() -> None:
    out = _ask(NETWORK_BOUND)
    assert out.sensitivity[f"{POOL}.network"] < -0.7
    top = out.candidates[0]
    assert top.kind == "acceptance_test" and "two nodes" in top.label, top
    assert list(top.jacobian) == [f"{POOL}.network"] and top.nodes == 2 and top.gpus == 16
    # the GEMM sweep and the one-node nccl-tests pin what this target barely depends on
    tests = {c.label: c for c in out.candidates if c.kind == "acceptance_test"}
    gemm = next(c for label, c in tests.items() if "GEMM" in label)
    assert gemm.relative_reduction < 0.05 < top.relative_reduction


def test_a_compute_bound_target_asks_for_a_gemm_sweep_or_a_single_node_run() -> None:
    out = _ask(COMPUTE_BOUND)
    assert out.sensitivity[f"{POOL}.compute"] < -0.8
    top = out.candidates[0]
    assert ("GEMM" in top.label) or (top.kind == "short_run" and top.nodes == 1), top
    network_test = next(c for c in out.candidates if "two nodes" in c.label)
    assert network_test.relative_reduction < 0.5 * top.relative_reduction


def test_short_runs_are_generated_from_the_target_and_fit() -> None:
    cfg = ParallelConfig(tp=2, pp=2, dp=16, zero_stage=1, sequence_parallel=True)
    model = load_model_preset("llama-3-8b")
    req = NextMeasurementRequest(
        model=model, cluster=CLUSTER, workload=W, config=cfg, posterior=prior_posterior(None, [POOL]), run_spread=0.08
    )
    out = next_measurement(req.model_copy(update={"top": 100}))
    runs = [c for c in out.candidates if c.kind == "short_run"]
    nodes = {c.nodes for c in runs}
    assert 1 in nodes and 2 in nodes and 8 in nodes, [c.label for c in runs]  # one node, two nodes, the target
    one = next(c for c in runs if c.nodes == 1)
    assert one.config is not None and one.config.tp == 2 and one.config.pp == 2  # the target's stage shape
    assert f"{POOL}.network" not in one.jacobian  # nothing crosses a NIC on one node
    for c in runs:
        assert c.config is not None and c.step_time_s is not None and c.gpus == c.config.gpus
        assert c.steps == 23 and c.gpu_hours > c.gpus * 300 / 3600  # setup + 20 steps + 3 warm-up
        assert config_words(c.config) in c.sentence and config_words(cfg) in c.sentence
        assert f"tp={c.config.tp}" in c.pins and f"dp={c.config.dp}" in c.pins
    # ranked by narrowing per GPU-hour
    ranks = [c.reduction_per_gpu_hour for c in out.candidates if c.worth_it]
    assert ranks == sorted(ranks, reverse=True)


def test_the_sentence_says_what_to_run_and_how_much_it_narrows() -> None:
    out = _ask(STAGED, top=100)
    run = next(c for c in out.candidates if c.kind == "short_run" and c.worth_it)
    assert run.sentence.startswith(f"A 23-step run of {run.label} ({run.gpus} GPUs of pool {POOL}")
    assert f"from ±{out.interval_before_pct:.1f}% to ±{run.interval_after_pct:.1f}%" in run.sentence
    assert "tp8 pp4 dp2 zero1" in run.sentence


@pytest.fixture(scope="module")
def fitted() -> tuple[ClusterCalibration, Posterior, Posterior]:
    truth = ClusterCalibration(pools={POOL: PoolCalibration(compute=0.88, intra_node=0.8, network=0.6)})
    configs = random_configs(MODEL, CLUSTER, W, 6, random.Random(4))
    report = fit_calibration(synthetic_points(MODEL, CLUSTER, W, configs, truth, 0.03, random.Random(5)))
    cal = report.calibration
    joint = posterior_from_report(cal, report.constants, report.runs, [POOL])
    diagonal = posterior_from_report(cal, report.constants, (), [POOL])
    return cal, joint, diagonal


def test_the_spread_after_is_never_larger_than_before(fitted: tuple[ClusterCalibration, Posterior, Posterior]) -> None:
    cal, joint, diagonal = fitted
    for posterior in (prior_posterior(None, [POOL]), joint, diagonal):
        for cfg in (NETWORK_BOUND, COMPUTE_BOUND):
            out = _ask(cfg, posterior, calibration=cal, top=100)
            assert out.considered >= 4
            for c in out.candidates:
                assert c.spread_after <= out.spread_before + 1e-12 and 0 <= c.relative_reduction <= 1
    rng = np.random.default_rng(0)
    for _ in range(200):  # the rank-one update on random posteriors, targets and observations
        a = rng.normal(size=(4, 4))
        cov = a @ a.T * rng.uniform(0.001, 0.1)
        g, j = rng.normal(size=4), rng.normal(size=4)
        before = math.sqrt(g @ cov @ g)
        after = spread_after(cov, g, j, rng.uniform(0.01, 0.2))
        full = np.linalg.inv(np.linalg.inv(cov) + np.outer(j, j) / 0.05**2)
        assert after <= before + 1e-12
        assert spread_after(cov, g, j, 0.05) == pytest.approx(math.sqrt(g @ full @ g), rel=1e-6)


def test_a_fitted_posterior_keeps_the_fit_s_correlations(
    fitted: tuple[ClusterCalibration, Posterior, Posterior],
) -> None:
    cal, joint, diagonal = fitted
    assert joint.constants == diagonal.constants == step_constants([POOL])
    assert [k.split(".", 1)[1] for k in joint.constants] == list(TIME_CONSTANTS)  # no memory_reserve
    cov = np.array(joint.covariance)
    assert np.allclose(cov, cov.T) and np.all(np.linalg.eigvalsh(cov) > 0)
    assert np.abs(cov - np.diag(np.diag(cov))).max() > 0  # the runs tie the constants together
    spreads = joint.spreads()
    for k, sd in spreads.items():
        assert sd <= PRIOR_SPREAD[k.split(".")[1]] + 1e-12
    assert spreads[f"{POOL}.compute"] < 0.75 * PRIOR_SPREAD["compute"]  # six runs narrow the GEMM rate
    assert joint.mean[0] == pytest.approx(math.log(cal.of(POOL).compute))
    # the calibration's runs already carry their information: the diagonal posterior overrates measuring one again
    run = ShortRun(label="again", purpose="", pool=POOL, workload=W, config=COMPUTE_BOUND)
    common = {"model": MODEL, "cluster": CLUSTER, "workload": W, "config": COMPUTE_BOUND, "calibration": cal}
    sigma = run_spread_of(cal)
    with_joint = rank_runs(NextMeasurementRequest(**common, posterior=joint, run_spread=sigma), [run])
    with_diag = rank_runs(NextMeasurementRequest(**common, posterior=diagonal, run_spread=sigma), [run])
    assert with_joint.spread_before < with_diag.spread_before


def test_the_prior_spread_is_the_sourced_one_and_bad_posteriors_are_refused() -> None:
    out = _ask(COMPUTE_BOUND)
    g = out.sensitivity
    expected = math.sqrt(sum((g.get(f"{POOL}.{k}", 0.0) * sd) ** 2 for k, sd in PRIOR_SPREAD.items()))
    assert out.spread_before == pytest.approx(expected, rel=1e-3)
    assert out.total_interval_pct > out.interval_before_pct
    bad = Posterior(constants=[f"{POOL}.compute"], mean=[0.0, 0.0], covariance=[[0.01]])
    with pytest.raises(DomainError) as err:
        _ask(COMPUTE_BOUND, bad)
    assert err.value.field == "posterior"


def test_constants_come_from_the_report_including_hierarchical_ones() -> None:
    """A framework's own compute factor (fitted where a cluster ran two frameworks) is a constant like the others:
    a DeepSpeed target depends on it as much as on compute, a Megatron target not at all."""

    def fitted(name: str, spread: float) -> ConstantFit:
        return ConstantFit(
            pool=POOL, name=name, meaning="", prior=1.0, value=1.0, spread=spread, runs=3, identified=True
        )

    report = [fitted("compute", 0.04), fitted("network", 0.1), fitted("framework_compute.deepspeed", 0.08)]
    cal = ClusterCalibration(pools={POOL: PoolCalibration(framework_compute={"deepspeed": 0.9})})
    posterior = posterior_from_report(cal, report, (), [POOL])
    key = f"{POOL}.framework_compute.deepspeed"
    assert posterior.constants[-1] == key and posterior.spreads()[key] == pytest.approx(0.08)
    assert posterior.mean[-1] == pytest.approx(math.log(0.9))
    ds = W.model_copy(update={"framework": "deepspeed"})
    cfg = ParallelConfig(tp=1, pp=1, dp=64, zero_stage=3, recompute="full")
    for workload, depends in ((ds, True), (W, False)):
        req = NextMeasurementRequest(
            model=MODEL,
            cluster=CLUSTER,
            workload=workload,
            config=cfg,
            calibration=cal,
            posterior=posterior,
            run_spread=0.06,
        )
        g = next_measurement(req).sensitivity
        if depends:
            assert g[key] == pytest.approx(g[f"{POOL}.compute"], rel=0.05) and g[key] < -0.1
        else:
            assert key not in g
