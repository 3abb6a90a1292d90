"""A stack the constants were not fitted on gets the between-source spread as its compute prior (issue 45 §3)."""

from __future__ import annotations

from optimizer.calibration.fit import PRIOR_SPREAD, STACK_PRIOR_SPREAD, CalibrationFit, FitPoint
from optimizer.spec.cluster_loading import resolve_cluster
from optimizer.spec.model_loading import resolve_model
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import TrainingWorkload


def _compute_prior(framework: str, version: str | None) -> float:
    w = TrainingWorkload(global_batch_size=8, seq_len=4096, framework=framework, framework_version=version)
    point = FitPoint(
        "run", resolve_model("llama-3-8b"), resolve_cluster("dgx-h100:1"), w, ParallelConfig(dp=8, zero_stage=3), 1.0
    )
    fit = CalibrationFit([point])
    pool = resolve_cluster("dgx-h100:1").pools[0].name
    return float(fit.prior_sd[fit.index[f"{pool}.compute"]])


def test_a_new_release_widens_the_compute_prior_a_fitted_one_does_not() -> None:
    assert PRIOR_SPREAD["compute"] < STACK_PRIOR_SPREAD
    assert _compute_prior("torchtitan", "0.2.1") == STACK_PRIOR_SPREAD  # no fitted run of 0.2.1 on Hopper
    assert _compute_prior("megatron", "26.02") == PRIOR_SPREAD["compute"]
    assert _compute_prior("megatron", None) == PRIOR_SPREAD["compute"]
    assert _compute_prior("deepspeed", None) == STACK_PRIOR_SPREAD  # no fitted DeepSpeed run on Hopper


def test_a_measurement_brings_its_release_to_the_fit() -> None:
    from optimizer.calibration.measurements import Measurement

    w = TrainingWorkload(global_batch_size=8, seq_len=4096, framework="torchtitan")
    run = Measurement(step_time_s=1.0, framework="torchtitan", framework_version="0.2.1")
    assert run.with_release(w).framework_version == "0.2.1"
    assert Measurement(step_time_s=1.0, framework="megatron", framework_version="0.2.1").with_release(w) == w
    assert Measurement(step_time_s=1.0, framework_version="main@abc123").with_release(w) == w
    stated = w.model_copy(update={"framework_version": "0.2.2"})
    assert run.with_release(stated).framework_version == "0.2.2"  # the plan's own release stands
    nemo = Measurement(step_time_s=1.0, framework="nemo", framework_version="25.09")
    assert nemo.with_release(TrainingWorkload(global_batch_size=8, seq_len=4096)).framework_version == "25.09"
