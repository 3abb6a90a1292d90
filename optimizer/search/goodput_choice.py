"""Whether a goodput plan's gain over the step-time optimum holds across the failure inputs' ranges (issue 46 §2).

The goodput search prices failures at the inputs' point values; the step-time optimum is what a user runs without
the failure model. Both plans are priced at the same draws of the inputs (costmodel/goodput.py band_draws: the
same seed, so the samples pair up), and the goodput plan is taken only when its useful tokens per second beat the
step-time plan's at the 10th percentile of the paired ratio: a gain inside the 80% band is no reason to switch.
"""

from __future__ import annotations

from optimizer.costmodel.goodput import fraction_samples, quantile
from optimizer.search.result import PlannedConfig
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.workload import TrainingWorkload


def paired_gain_band(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainingWorkload,
    fast: PlannedConfig,
    pick: PlannedConfig,
    framework: str | None = None,
) -> tuple[float, float]:
    """80% band (10th, 90th percentile) of pick's useful tokens/s over fast's, at the same draws of the inputs."""
    fe, pe = fast.estimate, pick.estimate
    fs = fraction_samples(model, cluster, workload, fast.config, framework, fe.step_time_s)
    ps = fraction_samples(model, cluster, workload, pick.config, framework, pe.step_time_s)
    ratios = [
        (p * pe.tokens_per_s) / (f * fe.tokens_per_s) if f * fe.tokens_per_s > 0 else float("inf")
        for f, p in zip(fs, ps, strict=True)
    ]
    return quantile(ratios, 0.1), quantile(ratios, 0.9)


def gain_holds(band: tuple[float, float]) -> bool:
    """The goodput plan gains at the band's low end (its useful tokens/s above the step-time plan's)."""
    return band[0] > 1.0
