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
