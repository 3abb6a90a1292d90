"""Per-cluster calibration recovers hidden constants, resists wild runs and refuses what the data cannot pin."""

from __future__ import annotations

import dataclasses
import random

import pytest

from accuracy.synthetic_fit import median_error, random_configs, synthetic_points
from optimizer.calibration.fit import FitPoint, fit_calibration
from optimizer.calibration.measurements import Measurement
from optimizer.costmodel.estimate import estimate
from optimizer.errors import DomainError
from optimizer.spec.calibration import ClusterCalibration, PoolCalibration, Prior
from optimizer.spec.cluster_loading import load_cluster_preset
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.workload import TrainingWorkload

MODEL = load_model_preset("llama-3-70b")
CLUSTER = load_cluster_preset("dgx-h100:8")
W = TrainingWorkload(global_batch_size=256, seq_len=4096)
POOL = CLUSTER.pools[0].name
TRUTH = ClusterCalibration(pools={POOL: PoolCalibration(compute=0.88, intra_node=0.8, network=0.6)})


@pytest.fixture(scope="module")
def configs() -> list:
    return random_configs(MODEL, CLUSTER, W, 40, random.Random(1))


def test_identity_calibration_changes_nothing(configs: list) -> None:
    cfg = configs[0]
    a = estimate(MODEL, CLUSTER, W, cfg)
    b = estimate(MODEL, CLUSTER.with_calibration(ClusterCalibration(pools={POOL: PoolCalibration()})), W, cfg)
    assert a.step_time_s == b.step_time_s and a.peak_memory_gb == b.peak_memory_gb
    slower = CLUSTER.with_calibration(ClusterCalibration(pools={POOL: PoolCalibration(compute=0.5)}))
    c = estimate(MODEL, slower, W, cfg)
    assert c.step_time_s is not None and a.step_time_s is not None and c.step_time_s > 1.4 * a.step_time_s
    assert c.mfu is not None and a.mfu is not None and c.mfu < a.mfu  # MFU stays against the catalogued peak


def test_recovers_hidden_constants_and_cuts_error_3x(configs: list) -> None:
    rng = random.Random(7)
    train = synthetic_points(MODEL, CLUSTER, W, configs[:20], TRUTH, 0.03, rng)
    test = synthetic_points(MODEL, CLUSTER, W, configs[20:], TRUTH, 0.0, rng)
    report = fit_calibration(train)
    fitted = {c.name: c for c in report.constants}
    assert fitted["compute"].identified and fitted["compute"].runs == 20
    for c in report.constants:
        if c.identified:
            assert c.value == pytest.approx(TRUTH.of(POOL).value(c.name), rel=0.05), c
        else:
            assert c.value == 1.0 and c.reason  # left at the sourced value, with the reason
    before, after = median_error(test, None), median_error(test, report.calibration)
    assert after * 3 <= before, (before, after)


def test_five_runs_predict_others_within_5_percent(configs: list) -> None:
    rng = random.Random(3)
    train = synthetic_points(MODEL, CLUSTER, W, configs[:5], TRUTH, 0.03, rng)
    test = synthetic_points(MODEL, CLUSTER, W, configs[20:], TRUTH, 0.0, rng)
    assert median_error(test, fit_calibration(train).calibration) <= 0.05


def test_a_run_10x_off_is_an_outlier_not_a_new_constant(configs: list) -> None:
    rng = random.Random(5)
    train = synthetic_points(MODEL, CLUSTER, W, configs[:10], TRUTH, 0.03, rng)
    clean = fit_calibration(train).calibration.of(POOL).compute
    wild = dataclasses.replace(train[0], step_time_s=(train[0].step_time_s or 0) * 10)
    report = fit_calibration([wild, *train[1:]])
    assert report.runs[0].outlier and report.runs[0].flagged
    assert report.calibration.of(POOL).compute == pytest.approx(clean, rel=0.03)


def test_a_single_run_moves_compute_less_than_its_error(configs: list) -> None:
    """The prior: one run 20% slower than predicted moves the constant, but by less than 20%."""
    t = estimate(MODEL, CLUSTER, W, configs[0]).step_time_s
    assert t is not None
    report = fit_calibration([FitPoint("one", MODEL, CLUSTER, W, configs[0], step_time_s=t * 1.2)])
    k = report.calibration.of(POOL).compute
    assert 1 / 1.2 < k < 1.0 or not report.constants[0].identified


def test_memory_reserve_from_allocated_and_reserved_peaks(configs: list) -> None:
    cap = CLUSTER.gpu_of(CLUSTER.pools[0]).memory_bytes / 1e9
    pts = [
        FitPoint(f"m{i}", MODEL, CLUSTER, W, configs[i], peak_allocated_gb=50.0, peak_reserved_gb=50.0 + 0.04 * cap)
        for i in range(6)
    ]
    report = fit_calibration(pts)
    reserve = report.calibration.of(POOL).memory_reserve
    assert 0.04 < reserve < 0.06  # pulled from the sourced 0.10 towards the measured 0.04
    assert report.runs == [] and report.memory_runs == 6


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({}, "measurement"),
        ({"step_time_s": -1.0}, "step_time_s"),
        ({"peak_allocated_gb": 40.0, "peak_reserved_gb": 30.0}, "measurement.peak_reserved_gb"),
        ({"stage_times_s": [1.0, 0.0], "step_time_s": 1.0}, "measurement.stage_times_s"),
    ],
)
def test_bad_measurements_name_the_field(fields: dict, field: str) -> None:
    with pytest.raises((DomainError, ValueError)) as exc:
        Measurement.model_validate(fields)
    assert field in str(exc.value)


def test_measurement_against_its_workload() -> None:
    m = Measurement(step_time_s=10.0, tokens_per_s=W.tokens_per_step / 5.0)
    with pytest.raises(DomainError, match="implies"):
        m.check_against(W, 80.0)
    with pytest.raises(DomainError, match="more than the GPU"):
        Measurement(peak_allocated_gb=100.0).check_against(W, 80.0)


def test_acceptance_prior_moves_the_start_and_is_reported() -> None:
    """A pool whose nccl-tests measured its fabric at 0.6 of the sourced bandwidth starts there: with no run
    depending on the network, the constant stays at the acceptance figure and says so."""
    rng = random.Random(5)
    configs = random_configs(MODEL, CLUSTER, W, 6, rng)
    truth = ClusterCalibration(pools={POOL: PoolCalibration(compute=0.9)})
    pts = synthetic_points(MODEL, CLUSTER, W, configs, truth, 0.0, rng)
    priors = {POOL: {"network": Prior(value=0.6, spread=0.05, source="all_reduce_perf, 4 nodes")}}
    report = fit_calibration(pts, priors)
    net = next(c for c in report.constants if c.name == "network")
    assert net.prior == pytest.approx(0.6)
    assert net.prior_source == "all_reduce_perf, 4 nodes"
    assert net.identified
    assert abs(net.value / 0.6 - 1) < 0.15
    plain = fit_calibration(pts)
    assert next(c for c in plain.constants if c.name == "network").prior == 1.0
    # Only acceptance tests, no runs: the calibration is the acceptance figures.
    only = fit_calibration([], priors)
    assert only.calibration.of(POOL).network == pytest.approx(0.6)


def test_a_run_the_model_cannot_express_is_left_out_with_its_reason(configs: list) -> None:
    rng = random.Random(9)
    train = synthetic_points(MODEL, CLUSTER, W, configs[:6], TRUTH, 0.02, rng)
    odd = dataclasses.replace(
        train[0], step_time_s=(train[0].step_time_s or 0) * 1.6, unmodelled="fp8 row-wise scaling"
    )
    report = fit_calibration([odd, *train[1:]])
    left = [r for r in report.runs if r.left_out]
    assert [r.left_out for r in left] == ["fp8 row-wise scaling"] and not left[0].outlier
    clean = fit_calibration(train[1:])
    assert report.calibration.of(POOL).compute == pytest.approx(clean.calibration.of(POOL).compute, rel=1e-6)
    assert len(report.calibration.run_residuals) == 5  # the left-out run is not a residual


def test_host_cost_has_its_own_signature() -> None:
    """A slow host (a third of the sourced issue rate) shows on short layers only: the fit tells it from compute
    because it scales with layers x micro-batches, not FLOPs, and predicts other configurations with it."""
    small = TrainingWorkload(global_batch_size=64, seq_len=1024)
    # A GPT-2-medium-sized model (24 layers, h 1024 [Radford et al. 2019, Table 2]): layers of tens of microseconds.
    tiny = load_model_preset("llama-3-8b").model_copy(
        update={
            "name": "gpt-350m",
            "num_layers": 24,
            "hidden_size": 1024,
            "ffn_hidden_size": 4096,
            "num_attention_heads": 16,
            "num_kv_heads": 16,
        }
    )
    cluster = load_cluster_preset("dgx-h100:2")
    pool = cluster.pools[0].name
    truth = ClusterCalibration(pools={pool: PoolCalibration(compute=0.95, host=0.33)})
    rng = random.Random(4)
    cfgs = random_configs(tiny, cluster, small, 16, rng)
    train = synthetic_points(tiny, cluster, small, cfgs[:10], truth, 0.02, rng)
    test = synthetic_points(tiny, cluster, small, cfgs[10:], truth, 0.0, rng)
    report = fit_calibration(train)
    host = next(c for c in report.constants if c.name == "host")
    assert host.identified and 0.25 < host.value < 0.45, host
    assert median_error(test, report.calibration) < 0.5 * median_error(test, None)


def test_a_framework_gets_its_own_factor_only_where_the_cluster_runs_two() -> None:
    """Hierarchical: the cluster's compute is shared; DeepSpeed on the same cluster runs 15% slower than the model
    prices it, which a framework-level factor absorbs (identified from its own runs); a cluster that runs one
    framework gets no such constant."""
    cluster = load_cluster_preset("dgx-a100:4")
    model = load_model_preset("llama-2-13b")
    pool = cluster.pools[0].name
    truth = ClusterCalibration(pools={pool: PoolCalibration(compute=0.95, framework_compute={"deepspeed": 0.85})})
    rng = random.Random(6)
    meg = TrainingWorkload(global_batch_size=128, seq_len=4096)
    ds = meg.model_copy(update={"framework": "deepspeed"})
    pts = synthetic_points(model, cluster, meg, random_configs(model, cluster, meg, 8, rng), truth, 0.02, rng)
    pts += synthetic_points(model, cluster, ds, random_configs(model, cluster, ds, 6, rng), truth, 0.02, rng)
    report = fit_calibration(pts)
    names = {c.name: c for c in report.constants}
    own = names["framework_compute.deepspeed"]
    assert own.identified and own.value == pytest.approx(0.85, rel=0.06), own
    assert names["compute"].value == pytest.approx(0.95, rel=0.05)
    assert report.calibration.of(pool).framework_compute["deepspeed"] == pytest.approx(own.value)
    alone = fit_calibration(pts[:8])
    assert not any(c.name.startswith("framework_compute") for c in alone.constants)


def test_a_constant_on_its_bound_is_differenced_inside_it() -> None:
    """Runs a little faster than even twice the sourced compute push `compute` onto its upper bound (2.0): the fit
    differences it downwards there instead of stepping past the bound and failing."""
    cluster = load_cluster_preset("dgx-h100:2")
    model = load_model_preset("llama-3-8b")
    w = TrainingWorkload(global_batch_size=128, seq_len=4096)
    pool = cluster.pools[0].name
    truth = ClusterCalibration(pools={pool: PoolCalibration(compute=2.0)})
    rng = random.Random(3)
    pts = synthetic_points(model, cluster, w, random_configs(model, cluster, w, 3, rng), truth, 0.0, rng)
    fast = [dataclasses.replace(p, step_time_s=(p.step_time_s or 0) * 0.95) for p in pts]
    report = fit_calibration(fast)
    assert report.calibration.of(pool).compute == pytest.approx(2.0)
    assert all(r.measured_s < r.after_s < 0.7 * r.before_s for r in report.runs)
