"""Per-cluster calibration: fit each pool's few constants to the cluster's own measured runs [issue 14].

Model. For a run i and the pool constants theta (compute, intra_node, network per pool), the cost model predicts
a step time T_i(theta). The residual is r_i = log T_i(theta) - log measured_i, with a prior that keeps every
constant near the sourced value: (log theta_k) / tau_k. Minimised by bounded robust least squares
(scipy.optimize.lsq_linear inside iteratively reweighted soft-L1, so that one run 10x off does not drag
the fit) in log space.

Speed. T_i(theta) is a full estimate (0.2-0.7 ms), so the fit linearises log T_i around the current theta by
finite differences (one estimate per run and per constant its pools carry), solves the linear problem, and
re-linearises until the step is below 1% (Gauss-Newton on the true model; 2-3 rounds).

Identifiability. The posterior covariance (J^T J / sigma^2 + diag(1/tau^2))^-1 says how much the data pins each
constant. A constant whose posterior spread is not at most half its prior spread is fixed at its sourced value and
the rest refitted: the data cannot tell it apart (e.g. network bandwidth from single-node runs, or compute from
network when every run has the same communication share).

Memory reserve. The allocator slack is measured directly when a run reports both torch's allocated and reserved
peaks: (reserved - allocated) / capacity, combined with the prior by precision weighting.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from scipy.optimize import lsq_linear

from optimizer.calibration.memory_fit import fit_reserve
from optimizer.costmodel.constants import FRAGMENTATION_FRACTION
from optimizer.costmodel.estimate import estimate
from optimizer.costmodel.result import Estimate
from optimizer.errors import DomainError
from optimizer.frameworks.releases import stack_novelty
from optimizer.frameworks.validation import assign_pools
from optimizer.spec.calibration import BOUNDS, MEANING, ClusterCalibration, PoolCalibration, Prior, Priors
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.names import priced_framework
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import TrainingWorkload

# The step-time constants fitted from step times (memory_reserve comes from memory figures).
TIME_CONSTANTS: tuple[str, ...] = ("compute", "memory_bound", "attention", "host", "intra_node", "network")

# Prior of each constant, log units: how far a cluster's own constant sits from the sourced value. Compute: the
# spread of the cluster-level bias across cluster groups the model was not fitted to (between-group sd of the mean
# log error of Megatron-Bridge's dense rows per (system, container): 0.044, 19 groups; published sources 0.031;
# accuracy/blind_calibration.py, measured 2026-11-25). Bandwidths: NCCL busbw on one fabric type spans 0.6-1.0 of
# the sourced value across sites [nccl-tests issue reports]. Heavy-tailed (Student-t, PRIOR_TAIL degrees of
# freedom): a run a few percent off barely moves a constant (most of that is the run's own scatter), a cluster
# consistently 20% off moves it nearly all the way [robust hierarchical priors, Gelman et al. BDA3 §17.2].
# Memory-bound kernels and the attention core: their efficiencies vary with kernel versions more than dense GEMMs
# do (HBM efficiency of fused elementwise kernels 0.6-0.9 [constants HBM_EFFICIENCY sources]; flash-attention
# generations differ by 1.3-2x [FlashAttention-3 paper, Table 1]): 0.10. Host issue rate: several-fold across CPUs,
# Python and driver versions [CUDA Graphs blog]: 0.5. FP8 over BF16 and one framework over another on the same
# cluster: the spread of the cost model's per-framework and FP8 factors across published stacks (+-10%,
# costmodel/framework_runtime.py and benchmarks/model_accuracy.py per-framework medians): 0.10.
PRIOR_SPREAD: dict[str, float] = {
    "compute": 0.05,
    "memory_bound": 0.10,
    "attention": 0.10,
    "host": 0.5,
    "fp8_compute": 0.10,
    "framework_compute": 0.10,
    "intra_node": 0.25,
    "network": 0.35,
}
# A stack the constants were not fitted on (frameworks/releases.py stack_novelty: the framework on this GPU family, or
# its release, outside the fitted runs) is a new source as far as `compute` goes: its prior spread is the spread
# between sources of the model's left-out error, not between clusters of one stack. Measured 2026-11-28 on
# optimizer/costmodel/residuals.json: the standard deviation over the 22 training sources of each source's median
# left-out log error of step time, 0.092 (0.071 without the torchao float8 source). Applied to every pool for all
# (compute 0.05 -> 0.09) it made the blind protocol worse on the Megatron groups (k=2 published 3.5% -> 4.0%,
# bridge 4.1% -> 5.1%), so it applies where the stack is new only.
STACK_PRIOR_SPREAD = 0.09
STACK_NOVEL_AXES = ("framework", "release")
PRIOR_TAIL = 1.0
# The identification test measures what the data pin against these wider reference spreads (the spread of
# published clusters of one GPU family around the sourced values, +-15% for compute), so that a tight prior does
# not read as "not identified".
REFERENCE_SPREAD: dict[str, float] = {
    **PRIOR_SPREAD,
    "compute": 0.15,
    "memory_bound": 0.2,
    "attention": 0.2,
    "fp8_compute": 0.2,
    "framework_compute": 0.2,
}
# Each run's own scatter around its cluster's bias, log units, before the data speak: the within-group sd of the
# model's log error (accuracy/blind_calibration.py on the 32 cluster groups: dense runs 0.061, MoE runs 0.143;
# measured 2026-11-25). The fit re-estimates a common scale of these from its own residuals, the prior worth
# RUN_SPREAD_WEIGHT runs (a conjugate prior on the variance), and refits.
RUN_SPREAD = 0.06
RUN_SPREAD_MOE = 0.14
RUN_SPREAD_WEIGHT = 5.0
RUN_SPREAD_FLOOR = 0.01
# A run whose residual after the robust fit exceeds a factor 2 is an outlier: left out and refitted. One beyond
# 20% is flagged (kept) with the constants it is most sensitive to.
OUTLIER_LOG = math.log(2.0)
FLAG_RELATIVE = 0.20
# A constant is identified when the data shrink its spread to at most half the prior's (they carry at least 3/4
# of what is known about it); otherwise it stays at its sourced value. The identified ones are fitted jointly,
# each shrunk towards its sourced value by its share of prior information (at most 1/4). An absolute bar (7.5%)
# was tried: it fixed weakly pinned bandwidth factors at 1, whose effect compute then absorbed (on PCIe compute
# came out 0.78 for a hidden 0.92, and held-out errors were 2-3x larger; benchmarks/calibration.py).
IDENTIFIED_SHRINK = 0.5
# A run informs a constant when its log step time moves by at least 5% of a log change of that constant.
INFORMS = 0.05
# Robust loss: soft-L1 on each run's residual with the run spread as its scale, so that a run several spreads
# off counts linearly, not quadratically, and one wild run barely moves the fit [scipy least_squares 'soft_l1'
# loss, here by IRLS so that the prior stays quadratic].
IRLS_ROUNDS = 30
FD_STEP = 0.05  # finite-difference step, log units
MAX_ROUNDS = 4
CONVERGED = 0.01


@dataclass(frozen=True)
class FitPoint:
    """One measured run as the fit sees it."""

    label: str
    model: ModelSpec
    cluster: ClusterSpec
    workload: TrainingWorkload
    config: ParallelConfig
    step_time_s: float | None = None
    peak_allocated_gb: float | None = None
    peak_reserved_gb: float | None = None
    unmodelled: str = ""  # what this run used that the cost model does not price: compared, never fitted


class ConstantFit(BaseModel):
    """One fitted constant of one pool."""

    model_config = ConfigDict(frozen=True)

    pool: str
    name: str
    meaning: str
    prior: float
    value: float
    spread: float = Field(description="Posterior standard deviation, relative (log units).")
    runs: int = Field(description="Runs whose prediction depends on it (the support).")
    identified: bool
    reason: str = Field(default="", description="Why it stayed at its prior, when it did.")
    prior_source: str = Field(
        default="sourced", description="Where the prior's centre comes from: 'sourced' or an acceptance test."
    )


class RunFit(BaseModel):
    """One run: measured vs predicted before and after the fit."""

    model_config = ConfigDict(frozen=True)

    label: str
    measured_s: float
    before_s: float
    after_s: float
    outlier: bool = Field(description="Left out of the fit (more than 2x off after the robust fit).")
    left_out: str = Field(
        default="", description="Why the run was not fitted at all: something it used that the model does not price."
    )
    flagged: bool = Field(description="More than 20% off after the fit.")
    sensitivity: dict[str, float] = Field(
        description="d log(step time) / d log(constant), per pool.constant: the terms most likely responsible."
    )

    @property
    def error_before(self) -> float:
        return self.before_s / self.measured_s - 1

    @property
    def error_after(self) -> float:
        return self.after_s / self.measured_s - 1


class FitReport(BaseModel):
    """The fitted calibration with its evidence."""

    model_config = ConfigDict(frozen=True)

    calibration: ClusterCalibration
    constants: list[ConstantFit]
    runs: list[RunFit]
    measurements: int = Field(description="Runs given to the fit (with a step time, memory figures or both).")
    memory_runs: int
    median_error_before: float | None
    median_error_after: float | None
    elapsed_s: float


@dataclass
class _Param:
    pool: str
    name: str
    framework: str = ""  # for framework_compute: whose

    @property
    def label(self) -> str:
        """The constant's name as reports print it (framework_compute.deepspeed)."""
        return f"{self.name}.{self.framework}" if self.framework else self.name

    @property
    def key(self) -> str:
        return f"{self.pool}.{self.label}"

    def applies_to(self, point: FitPoint) -> bool:
        """Whether a run's prediction can depend on this constant at all."""
        if self.name == "fp8_compute":
            return point.workload.precision == "fp8"
        if self.name == "framework_compute":
            return priced_framework(point.workload.framework) == self.framework
        return True


class _Linearised:
    """log T_i(x) ~ f0_i + J_i (x - x0), evaluated by finite differences at x0."""

    def __init__(self, f0: np.ndarray, jac: np.ndarray, x0: np.ndarray) -> None:
        self.f0, self.jac, self.x0 = f0, jac, x0


class CalibrationFit:
    """The state of one fit: the runs with a step time, the parameters their pools carry, the current point."""

    def __init__(self, points: Sequence[FitPoint], priors: Priors | None = None) -> None:
        # Runs the model cannot express are left out before anything is fitted (they would inflate the spread and
        # make the identification test refuse every constant).
        self.timed = [p for p in points if p.step_time_s is not None and not p.unmodelled]
        self.priors: Priors = priors or {}
        pools: list[str] = []
        for p in self.timed:
            for name in self._pools_of(p):
                if name not in pools:
                    pools.append(name)
        self.params = [_Param(pool, k) for pool in pools for k in TIME_CONSTANTS]
        self.params += [p for pool in pools for p in self._level_params(pool)]
        self.index = {p.key: i for i, p in enumerate(self.params)}
        self.log_measured = np.array([math.log(p.step_time_s or 1.0) for p in self.timed])
        given = [self.priors.get(p.pool, {}).get(p.name) for p in self.params]
        # Each constant's prior: an acceptance test's figure where the pool has one, else the sourced value.
        self.measured_prior = np.array([g is not None for g in given], dtype=bool)
        self.prior_mu = np.array([math.log(g.value) if g else 0.0 for g in given])
        self.reference_sd = np.array([REFERENCE_SPREAD[p.name] for p in self.params])
        novel = self._novel_stack_pools()
        self.prior_sd = np.array(
            [
                g.spread
                if g
                else (STACK_PRIOR_SPREAD if p.name == "compute" and p.pool in novel else PRIOR_SPREAD[p.name])
                for g, p in zip(given, self.params, strict=True)
            ]
        )
        lo = [math.log(BOUNDS[p.name][0]) for p in self.params]
        hi = [math.log(BOUNDS[p.name][1]) for p in self.params]
        self.bounds = (np.array(lo), np.array(hi))
        # The parameters each run's prediction can depend on (its stages' pools).
        self.touches = [
            [j for j, prm in enumerate(self.params) if prm.pool in self._pools_of(p) and prm.applies_to(p)]
            for p in self.timed
        ]
        self.prior_log_times = np.zeros(len(self.timed))
        # Each run's own spread before the data speak: its regime's run-to-run scatter around its cluster's bias.
        self.run_base = np.array([RUN_SPREAD_MOE if p.model.moe is not None else RUN_SPREAD for p in self.timed])
        self.sigma = self.run_base.copy()

    def _level_params(self, pool: str) -> list[_Param]:
        """Hierarchical constants of a pool, only where its runs could pin them: an FP8 factor when it ran both
        precisions; a factor per framework other than its most measured one when it ran more than one."""
        runs = [p for p in self.timed if pool in self._pools_of(p)]
        out = []
        precisions = {p.workload.precision == "fp8" for p in runs}
        if precisions == {True, False}:
            out.append(_Param(pool, "fp8_compute"))
        counts: dict[str, int] = {}
        for p in runs:
            fw = priced_framework(p.workload.framework)
            counts[fw] = counts.get(fw, 0) + 1
        if len(counts) > 1:
            reference = max(sorted(counts), key=lambda fw: counts[fw])
            out += [_Param(pool, "framework_compute", fw) for fw in sorted(counts) if fw != reference]
        return out

    def _novel_stack_pools(self) -> set[str]:
        """Pools with a run whose stack (framework and release on the pool's GPU) lies outside the fitted runs."""
        out: set[str] = set()
        for p in self.timed:
            for name in self._pools_of(p):
                gpu = p.cluster.gpu_of(p.cluster.pool(name))
                fw = priced_framework(p.workload.framework)
                nov = stack_novelty(fw, p.workload.framework_version, gpu, p.workload.precision)
                if set(nov.names) & set(STACK_NOVEL_AXES):
                    out.add(name)
        return out

    @staticmethod
    def _pools_of(p: FitPoint) -> list[str]:
        """The pools a run's stages ran on, each once (the cost model's own assignment)."""
        return list(dict.fromkeys(pool.name for pool in assign_pools(p.cluster, p.config)))

    # ---- evaluation --------------------------------------------------------------------------------------------
    def calibration(self, x: np.ndarray, reserve: dict[str, float] | None = None) -> ClusterCalibration:
        values: dict[str, dict[str, Any]] = {
            pool: {k: prior.value for k, prior in consts.items() if k in TIME_CONSTANTS}
            for pool, consts in self.priors.items()
        }
        for i, p in enumerate(self.params):
            lo, hi = BOUNDS[p.name]
            value = min(hi, max(lo, float(math.exp(x[i]))))  # exp(log(bound)) may round past the bound
            if p.framework:
                values.setdefault(p.pool, {}).setdefault("framework_compute", {})[p.framework] = value
            else:
                values.setdefault(p.pool, {})[p.name] = value
        for pool, slack in (reserve or {}).items():
            values.setdefault(pool, {})["memory_reserve"] = slack
        return ClusterCalibration(pools={k: PoolCalibration(**v) for k, v in values.items()})

    def _log_time(self, point: FitPoint, cal: ClusterCalibration) -> float:
        return math.log(self._step(point, cal).step_time_s or 1.0)

    def _step(self, point: FitPoint, cal: ClusterCalibration) -> Estimate:
        est: Estimate = estimate(point.model, point.cluster.with_calibration(cal), point.workload, point.config)
        if est.step_time_s is None or est.step_time_s <= 0:
            raise DomainError("measurement", f"{point.label}: the cost model gives no step time for this run")
        return est

    def linearise(
        self, x: np.ndarray, previous: _Linearised | None = None, free: np.ndarray | None = None
    ) -> _Linearised:
        """The model linearised at `x`. With `previous` and `free`, only the free constants' columns are
        differenced again (the fixed ones keep their previous slopes: they are not fitted, only reported)."""
        n, k = len(self.timed), len(self.params)
        f0 = np.zeros(n)
        jac = np.zeros((n, k)) if previous is None else previous.jac.copy()
        base = self.calibration(x)
        for i, point in enumerate(self.timed):
            est = self._step(point, base)
            f0[i] = math.log(est.step_time_s or 1.0)
            hidden_host = est.breakdown is not None and est.breakdown.launch == 0.0
            for j in self.touches[i]:
                if previous is not None and free is not None and not free[j]:
                    continue
                step = FD_STEP if x[j] + FD_STEP <= self.bounds[1][j] else -FD_STEP  # a constant on its upper bound
                if hidden_host and step > 0 and self.params[j].name == "host":
                    jac[i, j] = 0.0  # no layer waits on the host, and a faster host cannot make one
                    continue
                xs = x.copy()
                xs[j] += step
                jac[i, j] = (self._log_time(point, self.calibration(xs)) - f0[i]) / step
        return _Linearised(f0, jac, x.copy())

    # ---- solving -----------------------------------------------------------------------------------------------
    def _solve_linear(self, lin: _Linearised, free: np.ndarray, keep: np.ndarray) -> np.ndarray:
        """Robust bounded linear least squares with the prior, over the free parameters (the others stay at their
        prior's centre):
        iteratively reweighted (soft-L1 weights on the runs only, the prior stays quadratic), each round a bounded
        linear least-squares solve (scipy.optimize.lsq_linear)."""
        idx = np.flatnonzero(free)
        x = self.prior_mu.copy()
        if idx.size == 0 or not keep.any():
            return x
        sigma = self.sigma[keep]
        jac = lin.jac[keep][:, idx] / sigma[:, None]
        fixed = lin.jac[keep] @ np.where(free, 0.0, x)  # the fixed constants' part of the prediction
        target = (self.log_measured[keep] - lin.f0[keep] + lin.jac[keep] @ lin.x0 - fixed) / sigma
        prior_sd = self.prior_sd[idx]
        lo, hi = self.bounds[0][idx], self.bounds[1][idx]
        mu = self.prior_mu[idx]
        z = np.clip(mu, lo, hi)
        for _ in range(IRLS_ROUNDS):
            r = jac @ z - target  # in run spreads
            w = (1.0 + r**2) ** -0.25  # sqrt of the soft-L1 weight 1 / sqrt(1 + r^2)
            u = (z - mu) / prior_sd  # in prior spreads
            v = np.sqrt((PRIOR_TAIL + 1) / (PRIOR_TAIL + u**2))  # sqrt of the Student-t IRLS weight
            a = np.vstack([jac * w[:, None], np.diag(v / prior_sd)])
            b = np.concatenate([target * w, v * mu / prior_sd])
            z_new = lsq_linear(a, b, bounds=(lo, hi)).x
            if float(np.max(np.abs(z_new - z))) < 1e-4:
                z = z_new
                break
            z = z_new
        x[idx] = z
        return x

    def _posterior_sd(self, jac: np.ndarray, free: np.ndarray, keep: np.ndarray, reference: bool = False) -> np.ndarray:
        """Posterior spread of each constant (the free ones; the fixed keep their prior's), with the fit's priors or
        (`reference`) with the wide reference spreads the identification test measures against."""
        idx = np.flatnonzero(free)
        prior_sd = self.reference_sd if reference else self.prior_sd
        sd = prior_sd.copy()
        if idx.size:
            j = jac[:, idx] / self.sigma[keep][:, None]
            info = j.T @ j + np.diag(1.0 / prior_sd[idx] ** 2)
            cov = np.linalg.inv(info)
            sd[idx] = np.sqrt(np.diag(cov))
        return sd

    def run(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, _Linearised]:
        """(x, posterior spread, free mask, kept-run mask, the last linearisation). Sets `prior_log_times` and
        `run_spread`: fitted once with the prior spread, then again with the spread the residuals show."""
        first = self.linearise(self.prior_mu.copy())
        self.prior_log_times = first.f0.copy()
        if self.measured_prior.any():  # "before" means the sourced constants, not the acceptance tests'
            sourced = self.calibration(np.zeros(len(self.params)))
            sourced = sourced.model_copy(update={"pools": {}})
            self.prior_log_times = np.array([self._log_time(p, sourced) for p in self.timed])
        # The spread is estimated from a fit where every constant a run depends on is free: fixing one the data
        # barely pin would leave its whole effect in the residuals and inflate the spread.
        # Outliers are found here, before the identification test, so that a wild run cannot make it refuse a
        # constant the other runs pin.
        _x, _sd, _free, keep, lin = self._run_once(first, identify=False)
        resid = ((lin.f0 - self.log_measured) / self.run_base)[keep]
        var = (RUN_SPREAD_WEIGHT + float(np.sum(resid**2))) / (RUN_SPREAD_WEIGHT + resid.size)
        self.sigma = np.maximum(RUN_SPREAD_FLOOR, self.run_base * math.sqrt(var))
        return self._run_once(first, keep=keep)

    def _run_once(
        self, lin: _Linearised, identify: bool = True, keep: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, _Linearised]:
        k = len(self.params)
        x = self.prior_mu.copy()
        free = np.any(np.abs(lin.jac) >= INFORMS, axis=0) if lin.jac.size else np.ones(k, dtype=bool)
        keep = np.ones(len(self.timed), dtype=bool) if keep is None else keep.copy()
        # Identifiability at the prior point: fix the least pinned constant until every free one is pinned.
        ref = self.reference_sd
        while identify:
            sd = self._posterior_sd(lin.jac[keep], free, keep, reference=True)
            weak = [j for j in np.flatnonzero(free) if sd[j] > IDENTIFIED_SHRINK * ref[j]]
            if not weak:
                break
            free[max(weak, key=lambda j: sd[j] / ref[j])] = False
        for _ in range(MAX_ROUNDS):
            x_new = self._solve_linear(lin, free, keep)
            resid = lin.f0 + lin.jac @ (x_new - lin.x0) - self.log_measured
            out = np.abs(resid) > OUTLIER_LOG
            if out.any() and (keep & ~out).any() and (keep & out).any():
                keep &= ~out
                x_new = self._solve_linear(lin, free, keep)
            step = float(np.max(np.abs(x_new - x))) if k else 0.0
            x = x_new
            lin = self.linearise(x, lin, free)
            if step < CONVERGED:
                break
        sd = self._posterior_sd(lin.jac[keep], free, keep)
        return x, sd, free, keep, lin


def _left_out_run(point: FitPoint, calibration: ClusterCalibration) -> RunFit:
    """A run the model cannot express: compared with both predictions, never fitted."""
    measured = float(point.step_time_s or 0.0)
    before = estimate(point.model, point.cluster, point.workload, point.config).step_time_s or 0.0
    cluster = point.cluster.with_calibration(calibration)
    after = estimate(point.model, cluster, point.workload, point.config).step_time_s or 0.0
    return RunFit(
        label=point.label,
        measured_s=measured,
        before_s=before,
        after_s=after,
        outlier=False,
        left_out=point.unmodelled,
        flagged=abs(after / measured - 1) > FLAG_RELATIVE,
        sensitivity={},
    )


def _prior_source(priors: Priors, pool: str, name: str) -> str:
    prior = priors.get(pool, {}).get(name)
    return prior.source or "acceptance test" if prior is not None else "sourced"


def _acceptance_only(pool: str, name: str, prior: Prior) -> ConstantFit:
    """A constant no timed run depends on, set by the pool's acceptance test alone."""
    return ConstantFit(
        pool=pool,
        name=name,
        meaning=MEANING[name],
        prior=prior.value,
        value=prior.value,
        spread=prior.spread,
        runs=0,
        identified=True,
        reason="set by its acceptance test (no training run depends on it)",
        prior_source=prior.source or "acceptance test",
    )


def fit_calibration(points: Sequence[FitPoint], priors: Priors | None = None) -> FitReport:
    """Fit a cluster's calibration to its measured runs (see the module docstring), starting from `priors` where
    acceptance tests measured a constant (the sourced values elsewhere)."""
    t0 = time.perf_counter()
    fit = CalibrationFit(points, priors)
    reserve_fits = fit_reserve(points)
    reserve = {pool: r.value for pool, r in reserve_fits.items()}
    constants: list[ConstantFit] = []
    runs: list[RunFit] = []
    before: list[float] = []
    after: list[float] = []
    if fit.timed:
        x, sd, free, keep, lin = fit.run()
        base = fit.prior_log_times
        for j, p in enumerate(fit.params):
            support = int(np.sum(np.abs(lin.jac[keep, j]) >= INFORMS))
            reason = ""
            from_test = bool(fit.measured_prior[j])
            if not free[j]:
                reason = "no run depends on it" if support == 0 else "the runs cannot tell it from the other constants"
                if from_test:
                    reason = f"held at its acceptance test: {reason}"
            constants.append(
                ConstantFit(
                    pool=p.pool,
                    name=p.label,
                    meaning=MEANING[p.name],
                    prior=float(math.exp(fit.prior_mu[j])),
                    value=float(math.exp(x[j])),
                    spread=float(sd[j]),
                    runs=support,
                    identified=bool(free[j]) or from_test,
                    reason=reason,
                    prior_source=_prior_source(fit.priors, p.pool, p.name),
                )
            )
        for i, point in enumerate(fit.timed):
            measured = float(point.step_time_s or 0.0)
            b, a = math.exp(base[i]), math.exp(lin.f0[i])
            before.append(abs(b / measured - 1))
            after.append(abs(a / measured - 1))
            runs.append(
                RunFit(
                    label=point.label,
                    measured_s=measured,
                    before_s=b,
                    after_s=a,
                    outlier=not bool(keep[i]),
                    flagged=abs(a / measured - 1) > FLAG_RELATIVE,
                    sensitivity={
                        fit.params[j].key: round(float(lin.jac[i, j]), 3)
                        for j in np.argsort(-np.abs(lin.jac[i]))
                        if abs(lin.jac[i, j]) >= INFORMS
                    },
                )
            )
        calibration = fit.calibration(x, reserve)
    else:
        calibration = fit.calibration(np.zeros(0), reserve)
    runs += [_left_out_run(p, calibration) for p in points if p.step_time_s is not None and p.unmodelled]
    fitted = {(c.pool, c.name) for c in constants}
    for pool, consts in (priors or {}).items():
        for name, prior in consts.items():
            if name in TIME_CONSTANTS and (pool, name) not in fitted:
                constants.append(_acceptance_only(pool, name, prior))
    for pool, r in reserve_fits.items():
        constants.append(
            ConstantFit(
                pool=pool,
                name="memory_reserve",
                meaning=MEANING["memory_reserve"],
                prior=FRAGMENTATION_FRACTION,
                value=r.value,
                spread=r.spread,
                runs=r.runs,
                identified=True,
                reason=r.reason,
            )
        )
    # What the cluster's runs leave unexplained after the fit: the residuals the intervals narrow to
    # (costmodel/uncertainty.py cluster_interval), with the constants they paid for.
    kept = [math.log(r.measured_s / r.after_s) for r in runs if not r.outlier and not r.left_out and r.after_s > 0]
    identified = sum(1 for c in constants if c.identified and c.name != "memory_reserve" and c.runs > 0)
    calibration = calibration.model_copy(update={"run_residuals": tuple(kept), "fitted_constants": identified})
    return FitReport(
        calibration=calibration,
        constants=constants,
        runs=runs,
        measurements=len(points),
        memory_runs=sum(r.runs for r in reserve_fits.values()),
        median_error_before=statistics.median(before) if before else None,
        median_error_after=statistics.median(after) if after else None,
        elapsed_s=time.perf_counter() - t0,
    )
