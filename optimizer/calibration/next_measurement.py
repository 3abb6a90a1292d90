"""The next measurement [issue 33 §3]: which short run or acceptance test would narrow a target plan's predicted
step time the most, by how much, and at what cost in GPU-hours.

Model. The calibration fit (optimizer/calibration/fit.py) treats each pool constant theta_k in log space with a
Gaussian posterior, mean m and covariance S, and each measured run i as log T_i(theta) + e_i with e_i ~ N(0,
sigma^2), sigma the per-run spread (model-form error plus run-to-run noise). Linearised at m:

- the target's sensitivity g = d log T / d log theta (central finite differences through `estimate`, each trial
  constant applied with `ClusterSpec.with_calibration`), and the constants' share of its predictive spread,
  s = sqrt(g' S g) (log units, about relative); the whole predictive spread adds the run floor: sqrt(s^2 + sigma^2);
- a candidate measurement with Jacobian j (a short run: its own d log T / d log theta; an acceptance test: a unit
  vector on the one constant it pins) and observation spread r (sigma for a run, the test's spread for a test)
  updates S' = (S^-1 + j j' / r^2)^-1 (rank-one, Sherman-Morrison: S' = S - S j j' S / (r^2 + j' S j)), so the
  target's spread after is sqrt(g' S' g) <= s, whatever the measurement says (the expected narrowing of a linear
  Gaussian model does not depend on the value measured).

Candidates. Short runs are the target configuration itself and variants generated from it that isolate a constant:
one node with the target's tp and cp (and its pp where it fits inside the node): no network; the target's layout at
fewer nodes (fewer data-parallel replicas, each with the target's micro-batches per step); data parallel over two
nodes with the target's tp, or the node's width as tp: the gradient all-reduce crosses the network; pipeline over
two nodes. Each is kept only where the cost model says it is valid and fits in memory. Acceptance tests are nccl-tests
on one node (pins intra_node), on two nodes (pins network) and a GEMM sweep (pins compute), per pool.

Cost. GPUs x (steps + warm-up) x predicted step time, plus a fixed setup per job (SHORT_RUN_SETUP_S); an
acceptance test occupies its nodes for ACCEPTANCE_TEST_S. Candidates are ranked by the narrowing of the constants'
spread per GPU-hour.

Limits (docs/uncertainty.md §8). Linear in log theta around the current constants; every run's error is independent
of the others' (so a run of the target itself is valued only for what it says about the constants, not for
measuring the target directly); the fit may hold a weakly pinned constant at its sourced value rather than move it
(fit.py IDENTIFIED_SHRINK), which this model does not anticipate; benchmarks/next_measurement.py checks the
predicted narrowing against real refits.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from optimizer.calibration.acceptance import GEMM_SPREAD, RUN_TO_RUN_SPREAD
from optimizer.calibration.fit import (
    PRIOR_SPREAD,
    RUN_SPREAD,
    RUN_SPREAD_FLOOR,
    RUN_SPREAD_MOE,
    RUN_SPREAD_WEIGHT,
    TIME_CONSTANTS,
    ConstantFit,
    RunFit,
)
from optimizer.calibration.run_logs import DEFAULT_WARMUP
from optimizer.costmodel.estimate import estimate
from optimizer.errors import DomainError
from optimizer.frameworks.validation import assign_pools
from optimizer.spec.calibration import ClusterCalibration, PoolCalibration, Priors
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import TrainingWorkload

# Constants of a pool that are not step-time factors (fitted from memory figures, not step times; fit.py).
MEMORY_CONSTANTS = frozenset({"memory_reserve"})
# Central finite-difference step, log units: the fit's own step (fit.py FD_STEP), taken both ways.
FD_STEP = 0.05
# 80% two-sided normal quantile (z_0.9 = 1.2816): the product's intervals are 80% (costmodel/uncertainty.py).
Z80 = 1.2816
# Steps a short run logs after its warm-up: the median of 20 steps carries run-to-run noise of a few percent / sqrt(20),
# well under the run spread sigma (6% dense, 14% MoE: fit.py RUN_SPREAD, RUN_SPREAD_MOE), so more steps would not
# narrow anything more in this model; the warm-up steps are the ones the log parsers skip (run_logs.DEFAULT_WARMUP).
DEFAULT_STEPS = 20
WARMUP_STEPS = DEFAULT_WARMUP
# Fixed cost of a short training job before its first step, seconds, on every GPU it holds: allocation, container
# start, process launch, torch.distributed and NCCL communicator set-up, model build and optimizer allocation. A
# judgement for jobs of 1-64 nodes (a few minutes); MegaScale (Jiang et al., NSDI 2024, §3.5 "fast initialization")
# measured about 1,000 s for a 2,048-GPU job before their fixes, so it is a floor at scale.
SHORT_RUN_SETUP_S = 300.0
# An acceptance test's time on its nodes, seconds: nccl-tests sweeps 8 B-8 GB (-b 8 -e 8G -f 2: 31 sizes) with 5
# warm-up and 20 timed iterations each, out of place and in place (nccl-tests defaults, printed in its header,
# e.g. NVIDIA/nccl-tests#104); at 8 GB that is 2(n-1)/n x 8 GB / busbw per iteration, under a second on NVLink and
# about 0.4 s at 45 GB/s across nodes, so the sweep takes 1-2 minutes; with the job's launch and NCCL init about
# five minutes. A GEMM sweep (a few shapes and dtypes, cuBLAS, every GPU of one node) takes as long.
ACCEPTANCE_TEST_S = 300.0
# A candidate that narrows the spread by less than this (log units, 0.1 percentage point) is listed as not worth it.
NEGLIGIBLE = 0.001


@dataclass(frozen=True)
class AcceptanceTest:
    """A test that observes one constant of a pool directly."""

    constant: str
    what: str  # the command, in words
    nodes: int  # nodes it runs on
    spread: float  # observation spread, log units
    why: str  # what it isolates


# The acceptance tests and their spreads: the acceptance-test room's own (optimizer/calibration/acceptance.py:
# nccl-tests' run-to-run variation on healthy nodes, 3%, RUN_TO_RUN_SPREAD; one GPU's GEMM rate against its
# siblings' clocks and power limits, 3%, GEMM_SPREAD). Which constant each pins is acceptance.py's mapping: a
# single-node nccl-tests run the NVLink / PCIe tier (intra_node), a multi-node one the NICs (network), mamf-finder's
# best mean TFLOP/s the GEMM rate (compute). A sweep must reach the bandwidth plateau (acceptance.MIN_LARGEST_BYTES:
# 128 MiB), which -e 8G does.
ACCEPTANCE_TESTS: tuple[AcceptanceTest, ...] = (
    AcceptanceTest(
        "intra_node",
        "all_reduce_perf -b 8 -e 8G -f 2 on one node",
        1,
        RUN_TO_RUN_SPREAD,
        "NVLink / PCIe bus bandwidth inside a node",
    ),
    AcceptanceTest(
        "network",
        "all_reduce_perf -b 8 -e 8G -f 2 on two nodes",
        2,
        RUN_TO_RUN_SPREAD,
        "NIC bus bandwidth between nodes",
    ),
    AcceptanceTest(
        "compute",
        "mamf-finder.py (the GEMM sweep of stas00/ml-engineering, the model's precision) on one node",
        1,
        GEMM_SPREAD,
        "GEMM throughput",
    ),
)


class Posterior(BaseModel):
    """What is known about a cluster's step-time constants: a Gaussian in log units."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    constants: list[str] = Field(description="The constants, as 'pool.name' (e.g. 'h100.network').")
    mean: list[float] = Field(description="Posterior mean of each constant, log of the factor (0: the sourced value).")
    covariance: list[list[float]] = Field(description="Posterior covariance, log units squared (row per constant).")
    basis: str = Field(default="", description="Where the posterior comes from, in words.")

    def spreads(self) -> dict[str, float]:
        """Each constant's posterior standard deviation, log units."""
        return {k: math.sqrt(max(0.0, self.covariance[i][i])) for i, k in enumerate(self.constants)}


class NextMeasurementRequest(BaseModel):
    """A target training plan, the calibration it is predicted with and what is known about the constants."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: ModelSpec = Field(description="The model trained.")
    cluster: ClusterSpec = Field(description="The cluster inventory (uncalibrated; `calibration` is applied).")
    workload: TrainingWorkload = Field(description="The target's training workload.")
    config: ParallelConfig = Field(description="The target's parallel configuration.")
    calibration: ClusterCalibration | None = Field(
        default=None, description="The cluster's current calibration (None: the sourced constants)."
    )
    posterior: Posterior = Field(description="The constants' posterior (its mean overrides `calibration`'s values).")
    run_spread: float = Field(
        gt=0,
        le=1.0,
        description="Per-run spread sigma of a measured step time of the target's kind around the model, log units; "
        "a short run of another kind (dense / MoE) scales it by the fit's ratio of their spreads.",
    )
    steps: int = Field(default=DEFAULT_STEPS, ge=1, le=10_000, description="Steps a short run logs after warm-up.")
    top: int = Field(default=10, ge=1, le=100, description="Candidates returned, best first.")
    tested: list[str] = Field(
        default_factory=list,
        description="Constants an acceptance test already set ('pool.name'): that test is not offered again (a "
        "repeat measures the same mapping from the test to the constant, not new information).",
    )


class Candidate(BaseModel):
    """One measurement that could be taken next."""

    model_config = ConfigDict(frozen=True)

    kind: str = Field(description="'short_run' (a training configuration for a few steps) or 'acceptance_test'.")
    label: str = Field(description="What to run, in words (configuration and nodes, or the test's command).")
    purpose: str = Field(description="What it isolates.")
    pool: str = Field(description="The pool it runs on ('a+b' when its stages span several).")
    config: ParallelConfig | None = Field(default=None, description="Short run: its configuration.")
    global_batch_size: int | None = Field(default=None, description="Short run: its global batch, sequences.")
    pins: list[str] = Field(
        default_factory=list, description="Short run: the pins that plan it (`meshplan plan --pin ...`)."
    )
    nodes: int = Field(description="Nodes it occupies.")
    gpus: int = Field(description="GPUs it occupies.")
    steps: int | None = Field(default=None, description="Short run: steps to log, warm-up included.")
    step_time_s: float | None = Field(default=None, description="Short run: predicted step time, seconds.")
    gpu_hours: float = Field(description="Its cost: GPUs x hours held, setup included, GPU-hours.")
    jacobian: dict[str, float] = Field(
        description="d log(observed) / d log(constant) per 'pool.name' (acceptance test: 1 on the constant it pins)."
    )
    observation_spread: float = Field(description="Spread of what it observes around the model, log units.")
    spread_after: float = Field(description="The target's constants spread after it, log units (1 sd).")
    reduction: float = Field(description="Spread before minus after, log units.")
    relative_reduction: float = Field(description="Reduction as a fraction of the spread before (0-1).")
    reduction_per_gpu_hour: float = Field(description="Reduction per GPU-hour, log units per GPU-hour (the rank).")
    interval_after_pct: float = Field(description="The constants' share of the 80% interval after it, +-percent.")
    worth_it: bool = Field(description="False when it narrows the spread by less than 0.1 percentage point.")
    sentence: str = Field(description="The candidate in one plain sentence.")


class ShortRun(BaseModel):
    """A training configuration that could run for a few steps."""

    model_config = ConfigDict(frozen=True)

    label: str = Field(description="What it is, in words.")
    purpose: str = Field(description="What it isolates.")
    pool: str = Field(description="The pool it runs on ('a+b' when its stages span several).")
    model: ModelSpec | None = Field(default=None, description="Its model (None: the target's).")
    cluster: ClusterSpec | None = Field(default=None, description="Its cluster inventory (None: the target's).")
    workload: TrainingWorkload = Field(description="Its training workload.")
    config: ParallelConfig = Field(description="Its parallel configuration.")
    step_time_s: float | None = Field(default=None, description="Predicted step time, seconds (once priced).")


class NextMeasurement(BaseModel):
    """The target's spread now and the candidates that would narrow it, best per GPU-hour first."""

    model_config = ConfigDict(frozen=True)

    target: str = Field(description="The target configuration in words.")
    step_time_s: float = Field(description="The target's predicted step time, seconds (current calibration).")
    sensitivity: dict[str, float] = Field(
        description="The target's d log(step time) / d log(constant) per 'pool.name' (about -share of its term)."
    )
    spread_before: float = Field(description="The constants' share of the target's spread, log units (sqrt(g'Sg)).")
    interval_before_pct: float = Field(description="The constants' share of the 80% interval now, +-percent.")
    run_spread: float = Field(description="Per-run floor sigma no constant removes, log units.")
    total_interval_pct: float = Field(description="The whole 80% interval now, constants and floor, +-percent.")
    basis: str = Field(description="Where the posterior comes from.")
    candidates: list[Candidate] = Field(description="Best narrowing per GPU-hour first (`top` of them).")
    considered: int = Field(description="Candidates generated and priced (feasible ones).")


# ---- the posterior ------------------------------------------------------------------------------------------------


def step_constants(pools: Sequence[str]) -> list[str]:
    """The step-time constants of `pools` as 'pool.name' (fit.TIME_CONSTANTS; a fitted calibration's report adds
    the hierarchical ones it fitted, e.g. 'pool.fp8_compute' or 'pool.framework_compute.deepspeed')."""
    return [f"{pool}.{name}" for pool in pools for name in TIME_CONSTANTS if name not in MEMORY_CONSTANTS]


def _split(key: str) -> tuple[str, str, str]:
    """'pool.name' or 'pool.framework_compute.fw' -> (pool, name, fw)."""
    pool, rest = key.split(".", 1)
    name, _, sub = rest.partition(".")
    return pool, name, sub


def _prior_spread(key: str) -> float:
    """The sourced prior's spread of a constant (fit.PRIOR_SPREAD; one the fit does not list: the widest)."""
    return PRIOR_SPREAD.get(_split(key)[1], max(PRIOR_SPREAD.values()))


def _log_value(calibration: ClusterCalibration | None, key: str) -> float:
    pool, name, sub = _split(key)
    pc = (calibration or ClusterCalibration()).of(pool)
    factors = {str(fw): v for fw, v in pc.framework_compute.items()}
    value = factors.get(sub, 1.0) if name == "framework_compute" else pc.value(name)
    return math.log(max(value, 1e-9))


def _with_value(pc: PoolCalibration, key: str, value: float) -> PoolCalibration:
    """`pc` with the constant `key` at `value` (model_copy: a trial step may sit just beyond a bound; it is a
    derivative, not a calibration)."""
    _pool, name, sub = _split(key)
    if name == "framework_compute":
        return pc.model_copy(update={"framework_compute": {**pc.framework_compute, sub: value}})
    return pc.model_copy(update={name: value})


def prior_posterior(
    calibration: ClusterCalibration | None, pools: Sequence[str], priors: Priors | None = None
) -> Posterior:
    """A cluster no run has calibrated: each constant at its current value with the sourced prior's spread
    (fit.PRIOR_SPREAD), or at its acceptance test's figure and spread where `priors` has one (what the fit would
    start from)."""
    keys = step_constants(pools)
    given = [(priors or {}).get(_split(k)[0], {}).get(_split(k)[1]) for k in keys]
    mean = [math.log(g.value) if g else _log_value(calibration, k) for g, k in zip(given, keys, strict=True)]
    sd = [g.spread if g else _prior_spread(k) for g, k in zip(given, keys, strict=True)]
    tested = sum(g is not None for g in given)
    basis = "no calibration: the sourced constants with their prior spreads"
    if tested:
        basis += f" ({tested} set by acceptance tests)"
    return Posterior(constants=keys, mean=mean, covariance=np.diag(np.square(sd)).tolist(), basis=basis)


def base_spread(model: ModelSpec) -> float:
    """The fit's per-run spread of a run of this model before the data speak: MoE runs scatter more
    (fit.RUN_SPREAD_MOE) than dense ones (fit.RUN_SPREAD)."""
    return RUN_SPREAD_MOE if model.moe is not None else RUN_SPREAD


def run_spread_of(calibration: ClusterCalibration | None, model: ModelSpec | None = None) -> float:
    """The per-run spread of a run of `model` as the fit sets it (fit.CalibrationFit.run): its regime's spread
    scaled by what the calibration's kept residuals say, the prior worth RUN_SPREAD_WEIGHT runs. The residuals are
    taken in units of this model's regime spread (the fit scales each by its own run's; a cluster whose runs mix
    dense and MoE is approximated)."""
    base = base_spread(model) if model is not None else RUN_SPREAD
    res = calibration.run_residuals if calibration is not None else ()
    scale2 = (RUN_SPREAD_WEIGHT + sum((r / base) ** 2 for r in res)) / (RUN_SPREAD_WEIGHT + len(res))
    return max(RUN_SPREAD_FLOOR, base * math.sqrt(scale2))


def posterior_from_report(
    calibration: ClusterCalibration,
    constants: Sequence[ConstantFit],
    runs: Sequence[RunFit] = (),
    pools: Sequence[str] = (),
    run_spread: float | None = None,
) -> Posterior:
    """The posterior of a fitted calibration from its stored report.

    With the report's runs (their sensitivities), the full covariance is rebuilt as the fit forms it: precision =
    diag(1 / prior spread^2) + sum over kept runs of j j' / sigma^2, every constant kept uncertain (the fit holds the
    constants it cannot identify at their sourced value and reports the others' spreads as if those were known;
    here they keep their prior spread and their correlations). A constant's prior spread is the sourced one
    (fit.PRIOR_SPREAD), or, when its prior came from an acceptance test, the report's spread (exact when no run
    depends on it, slightly narrow otherwise). Without runs: the diagonal of the report's spreads. Constants of
    `pools` the report does not list keep their prior."""
    listed = {f"{c.pool}.{c.name}": c for c in constants if c.name not in MEMORY_CONSTANTS}
    all_pools = list(dict.fromkeys([*(c.pool for c in listed.values()), *pools]))
    keys = list(dict.fromkeys([*step_constants(all_pools), *listed]))
    index = {k: i for i, k in enumerate(keys)}
    prior_sd = np.empty(len(keys))
    post_sd = np.empty(len(keys))
    for i, k in enumerate(keys):
        c = listed.get(k)
        base = _prior_spread(k)
        prior_sd[i] = base if c is None or c.prior_source == "sourced" else max(c.spread, 1e-6)
        post_sd[i] = base if c is None else max(c.spread, 1e-6)
    kept = [r for r in runs if not r.outlier and not r.left_out and r.sensitivity]
    if kept:
        sigma = run_spread if run_spread is not None else run_spread_of(calibration)
        precision = np.diag(1.0 / prior_sd**2)
        for r in kept:
            j = np.zeros(len(keys))
            for key, v in r.sensitivity.items():
                if key in index:
                    j[index[key]] = v
            precision += np.outer(j, j) / sigma**2
        cov = np.linalg.inv(precision)
        basis = (
            f"calibration {calibration.version}: joint posterior rebuilt from its {len(kept)} runs' sensitivities "
            f"(sigma {sigma:.1%})"
        )
    else:
        cov = np.diag(post_sd**2)
        basis = f"calibration {calibration.version}: the report's spreads (diagonal)"
    return Posterior(
        constants=keys,
        mean=[_log_value(calibration, k) for k in keys],
        covariance=cov.tolist(),
        basis=basis,
    )


# ---- sensitivities ------------------------------------------------------------------------------------------------


class Pricer:
    """Log step times under trial constants: `mean` (log factors of `keys`, 'pool.name') applied over `calibration`
    (its other constants, e.g. the memory reserve, unchanged), with one constant moved at a time."""

    def __init__(
        self,
        keys: Sequence[str],
        mean: Sequence[float] | np.ndarray,
        calibration: ClusterCalibration | None,
        model: ModelSpec,
        cluster: ClusterSpec,
    ) -> None:
        self.keys = list(keys)
        self.mean = np.array(mean, dtype=float)
        self.base = calibration or ClusterCalibration()
        self.model, self.cluster = model, cluster

    def calibration(self, x: np.ndarray) -> ClusterCalibration:
        """The calibration with the constants at `x` (log factors)."""
        pools: dict[str, PoolCalibration] = dict(self.base.pools)
        for k, v in zip(self.keys, x, strict=True):
            pool = _split(k)[0]
            pools[pool] = _with_value(pools.get(pool, PoolCalibration()), k, float(math.exp(v)))
        return self.base.model_copy(update={"pools": pools})

    def log_time(self, run: ShortRun, x: np.ndarray | None = None) -> float:
        """log(step time, s) of `run` with the constants at `x` (default: the mean)."""
        cal = self.calibration(self.mean if x is None else x)
        est = estimate(
            run.model or self.model, (run.cluster or self.cluster).with_calibration(cal), run.workload, run.config
        )
        if est.step_time_s <= 0:
            raise DomainError("config", "the cost model gives no step time for this configuration")
        return math.log(est.step_time_s)

    def jacobian(self, run: ShortRun) -> np.ndarray:
        """d log T / d log theta at the mean (central differences), zero for pools the run does not use."""
        used = {p.name for p in assign_pools(run.cluster or self.cluster, run.config)}
        j = np.zeros(len(self.keys))
        for i, k in enumerate(self.keys):
            if k.split(".", 1)[0] not in used:
                continue
            up, down = self.mean.copy(), self.mean.copy()
            up[i] += FD_STEP
            down[i] -= FD_STEP
            j[i] = (self.log_time(run, up) - self.log_time(run, down)) / (2 * FD_STEP)
        return j


def _pricer(req: NextMeasurementRequest) -> Pricer:
    return Pricer(req.posterior.constants, req.posterior.mean, req.calibration, req.model, req.cluster)


# ---- candidates ---------------------------------------------------------------------------------------------------


def config_words(c: ParallelConfig) -> str:
    """'tp8 pp4 dp2' with the other degrees and knobs that differ from the defaults."""
    parts = [f"tp{c.tp}", f"pp{c.pp}", f"dp{c.dp}"]
    parts += [f"{k}{getattr(c, k)}" for k in ("cp", "ep", "vp") if getattr(c, k) > 1]
    if c.zero_stage:
        parts.append(f"zero{c.zero_stage}")
    if c.recompute != "none":
        parts.append(f"recompute {c.recompute}")
    return " ".join(parts)


def _pins(c: ParallelConfig) -> list[str]:
    pins = [f"tp={c.tp}", f"pp={c.pp}", f"dp={c.dp}", f"cp={c.cp}", f"mbs={c.mbs}", f"vp={c.vp}"]
    pins += [f"zero={c.zero_stage}", f"recompute={c.recompute}", f"schedule={c.schedule}"]
    if c.ep > 1:
        pins.append(f"ep={c.ep}")
    return pins


def _nodes(cluster: ClusterSpec, c: ParallelConfig) -> int:
    """Nodes a configuration occupies: its GPUs on each pool over the pool's node width."""
    per_pool: dict[str, int] = {}
    for p in assign_pools(cluster, c):
        per_pool[p.name] = per_pool.get(p.name, 0) + c.gpus_per_stage
    return sum(math.ceil(n / cluster.pool(name).gpus_per_node) for name, n in per_pool.items())


def _on_nodes(cluster: ClusterSpec, c: ParallelConfig) -> str:
    n = _nodes(cluster, c)
    return f"{config_words(c)} on {n} node{'s' if n > 1 else ''}"


def _reshaped(
    target: ParallelConfig, w: TrainingWorkload, pool: str, tp: int, pp: int, dp: int
) -> tuple[ParallelConfig, TrainingWorkload] | None:
    """The target with new tp, pp and dp on one pool, each replica keeping the target's micro-batches per step (the
    global batch scaled with dp); None when the batch does not divide."""
    micro = w.global_batch_size // (target.dp * target.mbs)
    if micro < 1:
        return None
    update: dict[str, object] = {"tp": tp, "pp": pp, "dp": dp, "stage_pools": [pool] * pp}
    if pp != target.pp:
        update.update(layers_per_stage=None, pipeline_layout=None)
        if pp == 1:
            update.update(vp=1, schedule="1f1b")
    if tp == 1:
        update.update(sequence_parallel=False, tp_comm_overlap=False)
    if target.ep > 1 and (dp * target.cp) % target.ep:
        update["ep"] = math.gcd(target.ep, dp * target.cp)
    try:
        cfg = ParallelConfig.model_validate({**target.model_dump(), **update})
        wl = TrainingWorkload.model_validate({**w.model_dump(), "global_batch_size": micro * target.mbs * dp})
    except ValueError:
        return None
    return cfg, wl


def _divisors_down(n: int) -> list[int]:
    return [d for d in range(n, 0, -1) if n % d == 0]


def _shapes(req: NextMeasurementRequest, gpn: int, nodes_free: int) -> list[tuple[str, int, int, int]]:
    """(purpose, tp, pp, dp) of the variants on a pool of `nodes_free` nodes of `gpn` GPUs."""
    t, layers = req.config, req.model.num_layers
    width = t.tp * t.cp
    shapes: list[tuple[str, int, int, int]] = []
    if width <= gpn and gpn % width == 0:
        # one node, the target's tp (and as much of its pp as fits): no network
        for pp in [p for p in _divisors_down(gpn // width) if p <= t.pp and layers % p == 0][:1]:
            shapes.append(("compute and NVLink only (no network)", t.tp, pp, gpn // (width * pp)))
    # the target's layout on fewer nodes (fewer replicas): the same stages, a smaller data-parallel all-reduce
    target_nodes = math.ceil(t.gpus / gpn)
    for frac in (2, 4):
        dp = t.dp // frac
        if dp >= 1 and t.dp % frac == 0 and math.ceil(width * t.pp * dp / gpn) < target_nodes:
            shapes.append(("the target's stages with less data-parallel traffic", t.tp, t.pp, dp))
    if nodes_free >= 2:
        # data parallel over two nodes: the gradient all-reduce (or ZeRO gathers) cross the network
        for tp in dict.fromkeys([t.tp, gpn]):
            if gpn % (tp * t.cp) == 0:
                shapes.append(("data-parallel traffic across the network", tp, 1, 2 * gpn // (tp * t.cp)))
        # pipeline over two nodes: a point-to-point hop crosses the network each micro-batch
        if width <= gpn and gpn % width == 0 and layers % 2 == 0:
            shapes.append(("pipeline hops across the network", t.tp, 2, gpn // width))
    return shapes


def variants(req: NextMeasurementRequest) -> list[ShortRun]:
    """Short runs generated from the target (see the module docstring), before the feasibility check."""
    t, w, cluster = req.config, req.workload, req.cluster
    out = [
        ShortRun(
            label=f"the target itself, {_on_nodes(cluster, t)}",
            purpose="the target's own mix of compute and communication",
            pool="+".join(dict.fromkeys(p.name for p in assign_pools(cluster, t))),
            workload=w,
            config=t,
        )
    ]
    for pool in dict.fromkeys(p.name for p in assign_pools(cluster, t)):
        node = cluster.pool(pool)
        for purpose, tp, pp, dp in _shapes(req, node.gpus_per_node, node.healthy_nodes):
            shaped = _reshaped(t, w, pool, tp, pp, dp)
            if shaped is None:
                continue
            cfg, wl = shaped
            try:
                label = _on_nodes(cluster, cfg)
            except DomainError:  # more GPUs than the pool has healthy
                continue
            out.append(ShortRun(label=label, purpose=purpose, pool=pool, workload=wl, config=cfg))
    return out


def _priced(
    req: NextMeasurementRequest, run: ShortRun, adapt: bool, need_fit: bool = True
) -> tuple[ShortRun, float] | None:
    """The run (when `adapt` and it does not fit: with full recompute) as the cost model accepts it and (when
    `need_fit`) it fits in memory, with its predicted step time at the posterior mean; None when it does not."""
    cluster = (run.cluster or req.cluster).with_calibration(req.calibration)
    tries = [run]
    if adapt and run.config.recompute != "full":
        full = run.config.model_copy(update={"recompute": "full", "recompute_modules": None})
        label = run.label.replace(config_words(run.config), config_words(full)) + " (full recompute to fit)"
        tries.append(run.model_copy(update={"config": full, "label": label}))
    for r in tries:
        try:
            est = estimate(r.model or req.model, cluster, r.workload, r.config)
        except (DomainError, ValueError):
            continue
        if (est.feasible or not need_fit) and est.step_time_s > 0:
            return r, est.step_time_s
    return None


# ---- the update ---------------------------------------------------------------------------------------------------


def spread_after(cov: np.ndarray, g: np.ndarray, j: np.ndarray, r: float) -> float:
    """The target's constants spread sqrt(g' S' g) after observing j' theta with spread r: S' = (S^-1 + j j'/r^2)^-1,
    by Sherman-Morrison (S need not be invertible)."""
    sj = cov @ j
    gsg = float(g @ cov @ g)
    drop = float(g @ sj) ** 2 / (r * r + float(j @ sj))
    return math.sqrt(max(0.0, gsg - drop))


def interval_pct(spread: float) -> float:
    """The 80% half-width of a log spread, percent (the upper side: exp(z s) - 1)."""
    return 100.0 * (math.exp(Z80 * spread) - 1.0)


def _cost_words(gpu_hours: float) -> str:
    return f"{gpu_hours * 60:.0f} GPU-minutes" if gpu_hours < 1 else f"{gpu_hours:.1f} GPU-hours"


@dataclass(frozen=True)
class _Target:
    """The target as the update sees it."""

    keys: list[str]
    cov: np.ndarray
    g: np.ndarray
    before: float
    sigma: float
    words: str
    step_s: float

    def sentence(self, c: Candidate) -> str:
        if c.kind == "short_run":
            what = f"A {c.steps}-step run of {c.label} ({c.gpus} GPUs of pool {c.pool}, {_cost_words(c.gpu_hours)})"
        else:
            what = (
                f"Running {c.label} of pool {c.pool} ({c.gpus} GPUs, {_cost_words(c.gpu_hours)}; it pins {c.purpose})"
            )
        if not c.worth_it:
            return f"{what} would not narrow the prediction of {self.words}: its step time barely depends on it."
        return (
            f"{what} would narrow the constants' share of the 80% step-time interval of {self.words} from "
            f"±{interval_pct(self.before):.1f}% to ±{c.interval_after_pct:.1f}% "
            f"(the per-run floor of ±{interval_pct(self.sigma):.1f}% stays)."
        )

    def candidate(self, j: np.ndarray, r: float, hours: float, **fields: object) -> Candidate:
        after = min(spread_after(self.cov, self.g, j, r), self.before)
        reduction = self.before - after
        c = Candidate.model_validate(
            {
                **fields,
                "gpu_hours": hours,
                "jacobian": {k: round(float(v), 4) for k, v in zip(self.keys, j, strict=True) if abs(v) > 1e-6},
                "observation_spread": r,
                "spread_after": after,
                "reduction": reduction,
                "relative_reduction": reduction / self.before if self.before > 0 else 0.0,
                "reduction_per_gpu_hour": reduction / hours,
                "interval_after_pct": interval_pct(after),
                "worth_it": reduction >= NEGLIGIBLE,
                "sentence": "",
            }
        )
        return c.model_copy(update={"sentence": self.sentence(c)})


def _target(req: NextMeasurementRequest, pricer: Pricer) -> _Target:
    keys = pricer.keys
    cov = np.array(req.posterior.covariance, dtype=float)
    if cov.shape != (len(keys), len(keys)) or len(req.posterior.mean) != len(keys):
        raise DomainError("posterior", f"needs a mean and a {len(keys)}x{len(keys)} covariance for its constants")
    run = ShortRun(label="", purpose="", pool="", workload=req.workload, config=req.config)
    priced = _priced(req, run, adapt=False, need_fit=False)
    if priced is None:
        raise DomainError("config", "the cost model gives the target no step time: nothing to narrow")
    g = pricer.jacobian(priced[0])
    before = math.sqrt(max(0.0, float(g @ cov @ g)))
    return _Target(keys, cov, g, before, req.run_spread, config_words(req.config), priced[1])


def _short_run(req: NextMeasurementRequest, pricer: Pricer, target: _Target, run: ShortRun) -> Candidate:
    cluster = run.cluster or req.cluster
    steps = req.steps + WARMUP_STEPS
    hours = run.config.gpus * (steps * (run.step_time_s or 0.0) + SHORT_RUN_SETUP_S) / 3600
    spread = target.sigma * base_spread(run.model or req.model) / base_spread(req.model)
    return target.candidate(
        pricer.jacobian(run),
        spread,
        hours,
        kind="short_run",
        label=run.label,
        purpose=run.purpose,
        pool=run.pool,
        config=run.config,
        global_batch_size=run.workload.global_batch_size,
        pins=_pins(run.config),
        nodes=_nodes(cluster, run.config),
        gpus=run.config.gpus,
        steps=steps,
        step_time_s=run.step_time_s,
    )


def _acceptance(req: NextMeasurementRequest, target: _Target) -> list[Candidate]:
    index = {k: i for i, k in enumerate(target.keys)}
    out = []
    for pool in dict.fromkeys(p.name for p in assign_pools(req.cluster, req.config)):
        node = req.cluster.pool(pool)
        for test in ACCEPTANCE_TESTS:
            key = f"{pool}.{test.constant}"
            if key not in index or key in req.tested or test.nodes > node.healthy_nodes:
                continue
            j = np.zeros(len(target.keys))
            j[index[key]] = 1.0
            gpus = test.nodes * node.gpus_per_node
            out.append(
                target.candidate(
                    j,
                    test.spread,
                    gpus * ACCEPTANCE_TEST_S / 3600,
                    kind="acceptance_test",
                    label=test.what,
                    purpose=test.why,
                    pool=pool,
                    nodes=test.nodes,
                    gpus=gpus,
                )
            )
    return out


def _answer(req: NextMeasurementRequest, target: _Target, cands: list[Candidate]) -> NextMeasurement:
    ranked = sorted(cands, key=lambda c: (not c.worth_it, -c.reduction_per_gpu_hour, c.gpu_hours))
    return NextMeasurement(
        target=target.words,
        step_time_s=target.step_s,
        sensitivity={k: round(float(v), 4) for k, v in zip(target.keys, target.g, strict=True) if abs(v) > 1e-6},
        spread_before=target.before,
        interval_before_pct=interval_pct(target.before),
        run_spread=target.sigma,
        total_interval_pct=interval_pct(math.hypot(target.before, target.sigma)),
        basis=req.posterior.basis,
        candidates=ranked[: req.top],
        considered=len(cands),
    )


def next_measurement(req: NextMeasurementRequest) -> NextMeasurement:
    """The target's current spread and every candidate measurement (short runs generated from the target, the
    acceptance tests of its pools) ranked by narrowing per GPU-hour."""
    pricer = _pricer(req)
    target = _target(req, pricer)
    cands: list[Candidate] = []
    seen: set[str] = set()
    for run in variants(req):
        priced = _priced(req, run, adapt=True)
        if priced is None:
            continue
        r, t = priced
        key = r.config.model_dump_json() + r.workload.model_dump_json()
        if key not in seen:
            seen.add(key)
            cands.append(_short_run(req, pricer, target, r.model_copy(update={"step_time_s": t})))
    return _answer(req, target, cands + _acceptance(req, target))


def rank_runs(req: NextMeasurementRequest, runs: Sequence[ShortRun]) -> NextMeasurement:
    """The given runs (e.g. configurations a user could run, or runs already measured elsewhere) ranked as
    candidates for the target, as they are (no recompute added); runs the cost model refuses are left out."""
    pricer = _pricer(req)
    target = _target(req, pricer)
    cands = []
    for run in runs:
        priced = _priced(req, run, adapt=False)
        if priced is not None:
            cands.append(_short_run(req, pricer, target, priced[0].model_copy(update={"step_time_s": priced[1]})))
    return _answer(req, target, cands)
