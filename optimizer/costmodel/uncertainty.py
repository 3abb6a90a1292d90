"""80% prediction intervals on the cost model's estimates, from OUT-OF-SAMPLE errors (docs/uncertainty.md).

The residual table (residuals.json beside this module, written by `python -m accuracy.leave_out --write`) holds, for
every scored published run, log(measured / predicted) with the constants fitted on the run's own source refit
without it (leave-one-group-out). An interval is split conformal on those residuals [Vovk et al. 2005; Lei et al.
2018, "Distribution-free predictive inference for regression", JASA 113(523) §2.2]: the equal-tailed empirical
quantiles at ceil((n + 1)(1 - a/2)) and floor((n + 1) a/2) of the n residuals of the query's regime, a = 0.2,
applied to the log prediction. A regime with fewer than MIN_RUNS runs or MIN_SOURCES sources falls back to a
broader one (REGIME_LEVELS); the query's novelty along named axes widens it (novelty.py: each axis's widening
learned from left-out and quarantine errors by accuracy/novelty_fit.py).
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from importlib import resources
from typing import Any

from optimizer.costmodel.novelty import (
    RunFeatures as RunFeatures,
)
from optimizer.costmodel.novelty import (
    Widening,
    knob_distance,
    novelty,
    shipped_support,
    shipped_widening,
)
from optimizer.costmodel.published_mfu import best_published
from optimizer.costmodel.result import Estimate
from optimizer.spec.calibration import ClusterCalibration
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.names import priced_framework
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import InferenceWorkload, TrainingWorkload

# Nominal coverage of every interval: 80%, two-sided, equal tails [issue 38 §1].
COVERAGE = 0.80
# A regime needs this many left-out runs from this many sources before its own residuals are used: with n >= 9 the
# split-conformal 80% bounds are finite [Lei et al. 2018 §2.2: the ceil((n+1)(1-a/2))-th order statistic exists];
# 10 leaves one spare. A new query comes from a source the table has not seen, so a regime's residuals must span
# several sources (residuals of one source share its bias; cf. group k-fold, docs/uncertainty.md).
MIN_RUNS = 10
MIN_SOURCES = 5
# Regime levels, narrowest first: the features a residual must share with the query.
REGIME_LEVELS: tuple[tuple[str, ...], ...] = (
    ("framework", "family", "precision", "moe", "scale"),
    ("framework", "family", "precision", "moe"),
    ("framework", "family", "moe"),
    ("framework", "family"),
    ("family",),
    ("framework",),
    (),
)
# Beyond the regime's residuals, the interval widens with the query's novelty along named axes, each axis's widening
# learned from out-of-sample errors (optimizer/costmodel/novelty.py, novelty.json; docs/uncertainty.md section 3).
# Student t quantiles t_{0.9, df} for the normal-theory interval of a pool too small for conformal bounds (n < 9).
T90 = (3.078, 1.886, 1.638, 1.533, 1.476, 1.440, 1.415, 1.397)

STEP_METRIC = "step_time_s"
MEMORY_METRICS = ("peak_allocated_gb", "peak_reserved_gb")
TTFT_METRICS = ("ttft_s", "first_token_latency_s")
TPOT_METRICS = ("tpot_s",)
# Serving throughput figures are decode-bound: log(measured/predicted TPOT) ~ -log(measured/predicted throughput).
THROUGHPUT_METRICS = ("output_tokens_per_s", "output_tokens_per_s_per_gpu", "output_tokens_per_s_per_node")


@dataclass(frozen=True, slots=True)
class Residual:
    """One published figure of the residual table."""

    id: str
    """Record id in accuracy/data/published_runs.json or serving_runs.json."""
    group: str
    """Source of the figure (the unit left out)."""
    metric: str
    """What was measured: step_time_s, peak_allocated_gb, peak_reserved_gb, ttft_s, tpot_s, a throughput, ..."""
    predicted: float
    """In-sample prediction (the shipped constants), in the metric's unit."""
    measured: float
    """The published figure, in the metric's unit."""
    in_sample: float
    """log(measured / predicted) with the shipped constants."""
    left_out: float
    """log(measured / predicted) with the constants fitted on this source refit without it."""
    features: RunFeatures | None
    """Regime and knobs of a training run (step time and memory figures); None for the others."""
    engine: str | None
    """Serving engine of a serving figure."""


@dataclass(frozen=True, slots=True)
class Interval:
    """An 80% prediction interval."""

    low: float
    """Lower bound, in the predicted quantity's unit."""
    high: float
    """Upper bound."""
    basis: str
    """How it was made, in words."""
    runs: int
    """Residuals it rests on."""
    regime: str
    """The regime whose residuals were used."""
    widening: float = 1.0
    """Factor applied to the half-width (1 = none)."""


def training_gpu(cluster: ClusterSpec, config: ParallelConfig) -> str:
    """Catalog name of the GPU of the configuration's first stage (the GPU-variant novelty axis)."""
    first = config.stage_pools[0] if config.stage_pools else None
    pool = next((p for p in cluster.pools if p.name == first), cluster.pools[0])
    return str(cluster.gpu_of(pool).name)


def training_features(
    model: ModelSpec, cluster: ClusterSpec, workload: TrainingWorkload, config: ParallelConfig
) -> RunFeatures:
    """The regime features and knobs of one training configuration."""
    first = config.stage_pools[0] if config.stage_pools else None
    pool = next((p for p in cluster.pools if p.name == first), cluster.pools[0])
    return RunFeatures(
        framework=priced_framework(workload.framework),
        family=str(cluster.gpu_of(pool).family),
        precision=str(workload.precision),
        moe=model.moe is not None,
        gpus=config.gpus,
        tp=config.tp,
        pp=config.pp,
        dp=config.dp,
        cp=config.cp,
        ep=config.ep,
        vp=config.vp,
        mbs=config.mbs,
        recompute=str(config.recompute),
        zero_stage=config.zero_stage,
        schedule=str(config.schedule),
    )


def parse_residuals(doc: dict[str, Any]) -> tuple[Residual, ...]:
    """The residuals of a residual-table document."""
    out = []
    for r in doc["records"]:
        feats = RunFeatures(**r["features"]) if r.get("features") else None
        out.append(
            Residual(
                id=r["id"],
                group=r["group"],
                metric=r["metric"],
                predicted=float(r["predicted"]),
                measured=float(r["measured"]),
                in_sample=float(r["in_sample"]),
                left_out=float(r["left_out"]),
                features=feats,
                engine=r.get("engine"),
            )
        )
    return tuple(out)


@functools.cache
def _shipped_doc() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((resources.files("optimizer.costmodel") / "residuals.json").read_text())
    return doc


@functools.cache
def residual_table() -> tuple[Residual, ...]:
    """The shipped residual table (optimizer/costmodel/residuals.json)."""
    return parse_residuals(_shipped_doc())


def weighted_quantile(pairs: list[tuple[float, float]], level: float) -> float:
    """The smallest value whose cumulative weight reaches `level` of the total (pairs of value, weight)."""
    ordered = sorted(pairs)
    total, cum = sum(w for _, w in ordered), 0.0
    for x, w in ordered:
        cum += w
        if cum >= level * total - 1e-12:
            return x
    return ordered[-1][0]


def interval_offsets(residuals: list[tuple[str, float]], coverage: float = COVERAGE) -> tuple[float, float, str]:
    """(low, high) log offsets of an interval from (source, residual) pairs, and the method in words.

    With MIN_RUNS runs from MIN_SOURCES sources: the equal-tailed quantiles of the residuals' source-weighted
    empirical distribution, each source weighing one ("pooling CDFs": Dunn, Wasserman and Ramdas 2022,
    "Distribution-free prediction sets for two-layer hierarchical models", JASA; split conformal for exchangeable
    groups [Lei et al. 2018 §2.2]). Fewer: the normal-theory prediction interval of a new source's mean, t quantile
    with k - 1 degrees of freedom over the k source means, the within-source spread added in quadrature; from a
    single source, the same over its runs."""
    tail = (1 - coverage) / 2
    by_source: dict[str, list[float]] = {}
    for g, x in residuals:
        by_source.setdefault(g, []).append(x)
    k, n = len(by_source), len(residuals)
    if k >= MIN_SOURCES and n >= MIN_RUNS:
        pairs = [(x, 1 / len(by_source[g])) for g, x in residuals]
        return weighted_quantile(pairs, tail), weighted_quantile(pairs, 1 - tail), "source-weighted split-conformal"
    units = [sum(xs) / len(xs) for xs in by_source.values()] if k >= 2 else [x for _, x in residuals]
    if len(units) < 2:
        return -math.inf, math.inf, "no basis (fewer than two runs)"
    mean = sum(units) / len(units)
    between = sum((u - mean) ** 2 for u in units) / (len(units) - 1)
    within = (
        sum((x - sum(xs) / len(xs)) ** 2 for xs in by_source.values() for x in xs) / max(1, n - k) if k >= 2 else 0.0
    )
    half = T90[min(len(units) - 2, len(T90) - 1)] * math.sqrt(between * (1 + 1 / len(units)) + within)
    method = f"normal-theory, t over {k} source means" if k >= 2 else "normal-theory over one source's runs"
    return mean - half, mean + half, method


def _describe(query: RunFeatures, level: tuple[str, ...]) -> str:
    if not level:
        return "all regimes"
    words = {
        "framework": query.framework,
        "family": query.family,
        "precision": query.precision,
        "moe": "MoE" if query.moe else "dense",
        "scale": f"{query.scale} GPUs",
    }
    return " ".join(words[k] for k in level)


def knob_steps(query: RunFeatures, runs: tuple[RunFeatures, ...]) -> float:
    """How far the query's knobs lie beyond `runs`: doublings of a numeric knob beyond their range, plus one per
    categorical knob value none of them used (0 inside their range)."""
    return knob_distance(query, runs)[0]


@functools.cache
def published_features() -> tuple[RunFeatures, ...]:
    """The knobs of every published step time of the shipped table."""
    return tuple(r.features for r in residual_table() if r.metric == STEP_METRIC and r.features is not None)


@functools.lru_cache(maxsize=1024)
def base_offsets(
    query: RunFeatures, table: tuple[Residual, ...] | None = None, exclude_group: str | None = None
) -> tuple[float, float, int, str]:
    """(low, high, runs, regime): the split-conformal interval of the query's regime from the left-out residuals
    (without `exclude_group`'s), before any widening."""
    tab = residual_table() if table is None else table
    pool = [r for r in tab if r.metric == STEP_METRIC and r.features is not None and r.group != exclude_group]
    for level in REGIME_LEVELS:
        match = [r for r in pool if r.features and all(r.features.value(k) == query.value(k) for k in level)]
        if (len(match) >= MIN_RUNS and len({r.group for r in match}) >= MIN_SOURCES) or not level:
            lo, hi, _ = interval_offsets([(r.group, r.left_out) for r in match])
            return lo, hi, len(match), _describe(query, level)
    return -math.inf, math.inf, 0, "no published run"


@functools.lru_cache(maxsize=64)
def _published_without(table: tuple[Residual, ...] | None, exclude_group: str | None) -> tuple[RunFeatures, ...]:
    tab = residual_table() if table is None else table
    return tuple(r.features for r in tab if r.metric == STEP_METRIC and r.features and r.group != exclude_group)


def step_time_interval(
    query: RunFeatures,
    predicted: float,
    table: tuple[Residual, ...] | None = None,
    exclude_group: str | None = None,
    *,
    gpu: str = "",
    own_source: bool = False,
    stand_in: str = "",
    widen: Widening | None = None,
) -> Interval:
    """80% interval for a training step predicted at `predicted` seconds: the regime's split-conformal interval,
    widened by the query's novelty (novelty.py). `gpu` the catalog GPU (its variant is an axis; empty: not judged);
    `exclude_group` leaves one source out of the residuals and the fitted support, and `own_source` marks the query
    as one of the project's own runs (the nested check of benchmarks/uncertainty.py); `stand_in` what the model only
    approximates about the query; `widen` replaces the shipped per-axis widening (a refit of accuracy/novelty_fit)."""
    lo, hi, n, regime = base_offsets(query, table, exclude_group)
    support = tuple(s for s in shipped_support() if s.group != exclude_group)
    nov = novelty(
        query,
        gpu,
        support,
        _published_without(table, exclude_group),
        unseen_source=not own_source,
        stand_in=stand_in,
    )
    if not gpu:
        nov.values.pop("gpu_variant", None)
    w = shipped_widening(unseen=not own_source) if widen is None else widen
    center, half = (lo + hi) / 2, (hi - lo) / 2
    wide = w.half_width(half, nov)
    factor = wide / half if half > 0 and math.isfinite(half) else 1.0
    text = f"{COVERAGE:.0%} interval from {n} left-out published runs of {regime}"
    reasons = w.describe(nov)
    if reasons:
        text += f"; widened x{factor:.2g} by novelty (learned per axis, novelty.json): {reasons}"
    return Interval(predicted * math.exp(center - wide), predicted * math.exp(center + wide), text, n, regime, factor)


@functools.lru_cache(maxsize=256)
def _pooled_offsets(
    metrics: tuple[str, ...], table: tuple[Residual, ...] | None, engine: str | None, exclude_group: str | None
) -> tuple[float, float, int, bool, str]:
    tab = residual_table() if table is None else table
    flip = metrics == TPOT_METRICS
    pool = [
        (r, -r.left_out if r.metric in THROUGHPUT_METRICS else r.left_out)
        for r in tab
        if r.group != exclude_group and (r.metric in metrics or (flip and r.metric in THROUGHPUT_METRICS))
    ]
    own = [(r.group, x) for r, x in pool if r.engine == engine]
    use_own = bool(engine) and len(own) >= MIN_RUNS and len({g for g, _ in own}) >= MIN_SOURCES
    chosen = own if use_own else [(r.group, x) for r, x in pool]
    lo, hi, method = interval_offsets(chosen)
    return lo, hi, len(chosen), use_own, method


def pooled_interval(
    predicted: float,
    metrics: tuple[str, ...],
    what: str,
    table: tuple[Residual, ...] | None = None,
    engine: str | None = None,
    exclude_group: str | None = None,
) -> Interval:
    """80% interval from the residuals of `metrics` (of `engine` when it has MIN_RUNS of them from MIN_SOURCES
    sources, else pooled over engines); serving throughput residuals stand for TPOT with their sign turned."""
    lo, hi, n, own, method = _pooled_offsets(metrics, table, engine, exclude_group)
    regime = f"{what} of {engine}" if own else f"{what}, pooled"
    basis = f"{COVERAGE:.0%} interval ({method}) from {n} published {regime}"
    return Interval(predicted * math.exp(lo), predicted * math.exp(hi), basis, n, regime)


def memory_interval() -> Interval:
    """The 80% interval of a peak-memory prediction, as a factor on it (the shipped memory residuals)."""
    return pooled_interval(1.0, MEMORY_METRICS, "per-GPU peak memory records (all frameworks)")


# The regime name of an interval from the cluster's own runs.
CLUSTER_REGIME = "this cluster"
# A cluster's own runs replace the published-run interval once they leave at least this many degrees of freedom
# after the fit (a t interval on fewer is wider than the published one anyway).
MIN_CLUSTER_DOF = 2


def cluster_interval(predicted: float, calibration: ClusterCalibration | None) -> Interval | None:
    """80% prediction interval from the cluster's own measured runs: the residuals its calibration fit left, a
    normal-theory prediction interval (mean +- t(0.9, n - p) s sqrt(1 + 1/n), p the constants the fit identified;
    Hahn & Meeker, Statistical Intervals, 2nd ed., section 4.6). None when the runs leave fewer than
    MIN_CLUSTER_DOF degrees of freedom."""
    if calibration is None:
        return None
    res = calibration.run_residuals
    n, dof = len(res), len(res) - calibration.fitted_constants
    if dof < MIN_CLUSTER_DOF or n < 2:
        return None
    mean = sum(res) / n
    sd = math.sqrt(sum((r - mean) ** 2 for r in res) / (n - 1))
    from scipy.stats import t as student_t  # here, not at import: scipy.stats costs 0.7 s of every CLI start

    half = float(student_t.ppf(COVERAGE + (1 - COVERAGE) / 2, dof)) * sd * math.sqrt(1 + 1 / n)
    basis = (
        f"{COVERAGE:.0%} interval from {n} of this cluster's measured runs (calibration {calibration.version}; "
        f"t interval, {dof} degrees of freedom after {calibration.fitted_constants} fitted constants)"
    )
    return Interval(predicted * math.exp(mean - half), predicted * math.exp(mean + half), basis, n, CLUSTER_REGIME)


def narrower(published: Interval, own: Interval | None) -> Interval:
    """The cluster's own interval where it is narrower than the published-run one (its runs pin the error), else
    the published one, saying why the cluster's runs did not narrow it."""
    if own is None:
        return published
    if own.high / own.low < published.high / published.low:
        return own
    return Interval(
        published.low,
        published.high,
        f"{published.basis}; this cluster's {own.runs} measured runs give a wider interval, not used",
        published.runs,
        published.regime,
    )


def beyond_measured(query: RunFeatures, mfu: float, step_time_s: float) -> tuple[float, str] | None:
    """(the step time the best published MFU gives, why) when the predicted MFU exceeds the best any published run
    of the query's GPU family and precision reached (published_mfu.py); else None."""
    best = best_published(query.family, query.precision)
    if best is None or mfu <= best.mfu:
        return None
    floor = step_time_s * mfu / best.mfu
    return floor, (
        f"beyond measured territory: MFU {mfu:.1%} above the best published for {query.family} {query.precision} "
        f"({best.mfu:.1%}, {best.record}, {best.source}); the interval reaches {floor:.3g} s, the step at that MFU"
    )


def with_intervals(
    est: Estimate,
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainingWorkload | InferenceWorkload,
    config: ParallelConfig,
) -> Estimate:
    """The estimate with its 80% intervals and per-stage out-of-memory risk (the point estimate unchanged)."""
    mem = memory_interval()
    stages = [
        s.model_copy(update={"oom_risk": s.fits and s.memory_gb.total * mem.high > s.memory_gb.capacity})
        for s in est.stages
    ]
    update: dict[str, Any] = {
        "stages": stages,
        "peak_memory_interval_gb": (est.peak_memory_gb * mem.low, est.peak_memory_gb * mem.high),
    }
    if isinstance(workload, TrainingWorkload):
        feats = training_features(model, cluster, workload, config)
        step = step_time_interval(feats, est.step_time_s, gpu=training_gpu(cluster, config))
        step = narrower(step, cluster_interval(est.step_time_s, cluster.calibration))
        beyond = beyond_measured(feats, est.mfu, est.step_time_s)
        if beyond is not None:
            floor, why = beyond
            if step.regime == CLUSTER_REGIME:  # the cluster's own runs measured this territory: not widened
                why += "; not widened: this cluster's own measured runs give the interval"
            else:
                step = Interval(step.low, max(step.high, floor), f"{step.basis}; {why}", step.runs, step.regime)
            update["beyond_measured"] = why
        update["step_time_interval_s"] = (step.low, step.high)
        update["interval_basis"] = f"step time: {step.basis}. Memory: {mem.basis}."
    else:
        parts = []
        if est.ttft_s is not None:
            ttft = pooled_interval(est.ttft_s, TTFT_METRICS, "TTFT figures", engine=workload.engine)
            update["ttft_interval_s"] = (ttft.low, ttft.high)
            parts.append(f"TTFT: {ttft.basis}")
        if est.tpot_s is not None:
            tpot = pooled_interval(est.tpot_s, TPOT_METRICS, "TPOT and throughput figures", engine=workload.engine)
            update["tpot_interval_s"] = (tpot.low, tpot.high)
            parts.append(f"TPOT: {tpot.basis}")
        update["interval_basis"] = ". ".join([*parts, f"Memory: {mem.basis}"]) + "."
    return est.model_copy(update=update)


# ---- differences: the error of a predicted RATIO between two configurations of one setup (issue 38 §2) ----------

# Pair regimes: both configurations on one GPU system (the planner's alternatives on one pool), or on two (Megatron-
# Bridge rows of one setup on different systems; alternatives on different pools). Across GPUs the two levels' GPU
# errors do not cancel: the interval is about twice as wide (docs/uncertainty.md section 6).
SAME_GPU, ACROSS_GPUS = "same GPU", "across GPUs"


@dataclass(frozen=True, slots=True)
class PairResidual:
    """Two measured configurations of one setup (same model, batch, sequence and stack; other knobs)."""

    source: str
    """The unit left out: a published-run group, or one Megatron-Bridge container's performance summary."""
    kind: str
    """bridge (accuracy/data/megatron_bridge_summary.csv) or published (accuracy/data/published_runs.json)."""
    a: str
    """The first configuration (record id or row label)."""
    b: str
    """The second configuration."""
    same_gpu: bool
    """Whether both ran on one GPU system."""
    predicted_ratio: float
    """Predicted step time of a over b."""
    measured_ratio: float
    """Measured step time of a over b."""

    @property
    def residual(self) -> float:
        """log(predicted ratio) - log(measured ratio)."""
        return math.log(self.predicted_ratio) - math.log(self.measured_ratio)

    @property
    def regime(self) -> str:
        """SAME_GPU or ACROSS_GPUS."""
        return SAME_GPU if self.same_gpu else ACROSS_GPUS


def parse_pairs(section: dict[str, Any]) -> tuple[PairResidual, ...]:
    """The pairs of a residual table's `pairs` section (its records' keys are PairResidual's fields)."""
    return tuple(PairResidual(**p) for p in section["records"])


@functools.cache
def pair_table() -> tuple[PairResidual, ...]:
    """The shipped same-setup pairs (the `pairs` section of residuals.json)."""
    return parse_pairs(_shipped_doc()["pairs"])


RATIO_METHOD = "split-conformal over pairs, both orientations"


def ratio_offsets(
    pairs: tuple[PairResidual, ...], regime: str, exclude_source: str | None = None
) -> tuple[float, float, int, int]:
    """(low, high) of the 80% interval of a ratio residual in `regime`, with the pairs and sources it rests on.

    Split conformal [Lei et al. 2018 §2.2] over the regime's pairs, each in both orientations (a pair has no first
    member: r(a, b) = -r(b, a), so the interval is symmetric about 0), each pair weighing one: a ratio cancels the
    bias a source's runs share, which is why step times weigh sources, not runs. Measured: source-weighted quantiles
    cover only 72% of the same-GPU pairs left out by source (the many-pair sources have the larger ratio errors),
    per-pair quantiles 76% (benchmarks/uncertainty.py). `exclude_source` leaves one source out (the nested check)."""
    chosen = [p for p in pairs if p.regime == regime and p.source != exclude_source]
    units = [(x, 1.0) for p in chosen for x in (p.residual, -p.residual)]
    if len(chosen) < MIN_RUNS:
        return -math.inf, math.inf, len(chosen), len({p.source for p in chosen})
    tail = (1 - COVERAGE) / 2
    # The units are symmetric about 0, but the conformal order statistic of the lower tail need not mirror the
    # upper one's for every count (105 same-GPU pairs gave -0.0941 / +0.0925): take the upper and mirror it.
    high = weighted_quantile(units, 1 - tail)
    return -high, high, len(chosen), len({p.source for p in chosen})


@dataclass(frozen=True, slots=True)
class DifferenceQuantiles:
    """The shipped 80% interval of a ratio residual in one regime (residuals.json `pairs.intervals`)."""

    low: float
    """10% point of log(predicted ratio) - log(measured ratio)."""
    high: float
    """90% point."""
    pairs: int
    """Pairs it rests on."""
    sources: int
    """Sources of those pairs."""
    method: str
    """How the quantiles were made."""


@functools.cache
def difference_quantiles(regime: str = SAME_GPU) -> DifferenceQuantiles:
    """The shipped ratio-residual quantiles of a regime."""
    iv = _shipped_doc()["pairs"]["intervals"][regime]
    return DifferenceQuantiles(float(iv["low"]), float(iv["high"]), int(iv["pairs"]), int(iv["sources"]), iv["method"])


def difference_interval(ratio: float, same_gpu: bool = True) -> tuple[float, float]:
    """The 80% interval of the true step-time ratio of two configurations of one setup given their predicted ratio:
    the true ratio is the predicted one x exp(-r), r the ratio residual (its regime: on one GPU system or two)."""
    q = difference_quantiles(SAME_GPU if same_gpu else ACROSS_GPUS)
    return ratio * math.exp(-q.high), ratio * math.exp(-q.low)


def difference_basis(same_gpu: bool = True) -> str:
    """How the difference interval was made, in words."""
    regime = SAME_GPU if same_gpu else ACROSS_GPUS
    q = difference_quantiles(regime)
    return (
        f"{COVERAGE:.0%} interval of a predicted ratio ({q.method}) from {q.pairs} pairs of measured configurations "
        f"of one setup ({regime}) from {q.sources} sources (Megatron-Bridge containers and published sweeps)"
    )
