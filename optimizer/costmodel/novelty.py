"""How far a training query lies from what the cost model was fitted on, along named axes, and how much each axis
widens the step-time interval (issue 44 §2; docs/uncertainty.md section 3).

An axis is a kind of novelty: a setup nobody fitted (every query outside the project's own runs), a framework on a GPU
family with no or few fitted sources, a GPU variant, a precision, MoE, scale, knobs beyond the published runs, or a
stack the model prices through a stand-in. Each axis a has a value x_a (0 = as seen; 1 = novel; the graded axes count
doublings or knob steps) and a learned widening w_a (log units). The interval's half-width in log space is

    H = sqrt(h^2 + sum_a x_a w_a^2)

with h the half-width of the split-conformal interval of the query's regime (uncertainty.py): variances of
independent error sources add. The w_a are fitted by accuracy/novelty_fit.py on out-of-sample errors (the project's
runs left out by source, and the quarantine's runs as found) by minimising the interval score of the 80% intervals
[Gneiting and Raftery 2007, "Strictly proper scoring rules, prediction, and estimation", JASA 102(477) section 6.2],
each source weighing one; they ship in novelty.json beside this module with the fitted runs' support (which
framework, GPU, precision, MoE and scale each fitted source covers) and the coverage measured leave-one-source-out.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, fields
from importlib import resources
from typing import Any

# GPU-count buckets (upper bounds): one node, one rack-scale NVLink domain / a few nodes, hundreds, thousands.
SCALE_BUCKETS: tuple[tuple[int, str], ...] = ((8, "<=8"), (64, "9-64"), (512, "65-512"))
NUMERIC_KNOBS = ("tp", "pp", "dp", "cp", "ep", "vp", "mbs", "gpus")
CATEGORICAL_KNOBS = ("recompute", "zero_stage", "schedule")


@dataclass(frozen=True, slots=True)
class RunFeatures:
    """What places a training run in a regime and how far it lies from the published runs."""

    framework: str
    """Training framework priced (megatron, deepspeed, torchtitan)."""
    family: str
    """GPU family of the first stage's pool."""
    precision: str
    """GEMM precision (bf16, fp16, fp8)."""
    moe: bool
    """Whether the model has routed experts."""
    gpus: int
    """GPUs of the run."""
    tp: int
    """Tensor-parallel degree."""
    pp: int
    """Pipeline stages."""
    dp: int
    """Data-parallel degree."""
    cp: int
    """Context-parallel degree."""
    ep: int
    """Expert-parallel degree."""
    vp: int
    """Virtual stages per pipeline rank."""
    mbs: int
    """Micro-batch size, sequences."""
    recompute: str
    """Activation recomputation (none, selective, full)."""
    zero_stage: int
    """ZeRO stage."""
    schedule: str
    """Pipeline schedule."""

    @property
    def scale(self) -> str:
        """The GPU-count bucket (SCALE_BUCKETS)."""
        return next((name for top, name in SCALE_BUCKETS if self.gpus <= top), ">512")

    def value(self, name: str) -> Any:
        """A feature or knob by name (scale included)."""
        return self.scale if name == "scale" else getattr(self, name)

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def knob_distance(
    query: RunFeatures, published: tuple[RunFeatures, ...], include_gpus: bool = True
) -> tuple[float, list[str]]:
    """(steps, reasons): doublings of a numeric knob beyond the published runs' range (either side), plus one per
    categorical knob value none of them used; the GPU count only with `include_gpus` (the scale axis counts it
    against the fitted runs of the query's framework and family instead)."""
    steps, reasons = 0.0, []
    for name in NUMERIC_KNOBS if include_gpus else NUMERIC_KNOBS[:-1]:
        values = [int(p.value(name)) for p in published]
        q = int(query.value(name))
        if values and q > max(values):
            steps += math.log2(q / max(values))
            reasons.append(f"{name}={q} beyond any published run (max {max(values)})")
        elif values and q < min(values):
            steps += math.log2(min(values) / q)
            reasons.append(f"{name}={q} below any published run (min {min(values)})")
    for name in CATEGORICAL_KNOBS:
        if all(p.value(name) != query.value(name) for p in published):
            steps += 1
            reasons.append(f"{name} {query.value(name)} in no published run")
    return steps, reasons


# Axis names, in the order the basis lists them.
UNSEEN_SOURCE = "unseen_source"
FRAMEWORK_GPU = "framework_gpu"
FRAMEWORK_THIN = "framework_thin"
GPU_FAMILY = "gpu_family"
GPU_VARIANT = "gpu_variant"
PRECISION = "precision"
MOE = "moe"
SCALE = "scale"
KNOBS = "knobs"
STAND_IN = "stand_in"
AXES = (UNSEEN_SOURCE, FRAMEWORK_GPU, FRAMEWORK_THIN, GPU_FAMILY, GPU_VARIANT, PRECISION, MOE, SCALE, KNOBS, STAND_IN)
# A framework on a GPU family with fitted runs from fewer than this many sources is thin (its residual regime borrows
# a broader one; cf. MIN_SOURCES of the conformal regimes, 5, and the quarantine's torchtitan-on-Hopper runs).
THIN_SOURCES = 3
# Graded axes are capped: beyond 4 doublings (16x the fitted range) the widening stops growing.
MAX_STEPS = 4.0
# An axis whose learned value rests on fewer than MIN_EVIDENCE sources that exercise it keeps its judgement prior
# (PRIOR_WIDENING), and the basis says so. Prior: ln(2) x 0.1 ~ the old rule's doubling of a ~10% half-width for an
# unseen family; 0.05 per step for the graded axes (the old knob rule, +20% of a ~12% half-width per step).
MIN_EVIDENCE = 2
PRIOR_WIDENING: dict[str, float] = {a: 0.05 if a in (SCALE, KNOBS) else 0.10 for a in AXES}


@dataclass(frozen=True, slots=True)
class SupportRun:
    """One fitted step-time run, as the novelty axes see it."""

    group: str
    framework: str
    family: str
    gpu: str
    precision: str
    moe: bool
    gpus: int

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}


@dataclass(frozen=True, slots=True)
class Novelty:
    """The axes' values for one query and the words for each non-zero one."""

    values: dict[str, float]
    words: dict[str, str]


def novelty(
    query: RunFeatures,
    gpu: str,
    support: tuple[SupportRun, ...],
    published: tuple[RunFeatures, ...],
    unseen_source: bool = True,
    stand_in: str = "",
) -> Novelty:
    """The novelty axes of a query: `support` the fitted runs (one's own source left out for a nested check),
    `published` their knobs, `unseen_source` False only for the project's own runs (the model's structure was shaped
    on them), `stand_in` what the model approximates about the query (a quarantine record's `missing`)."""
    values: dict[str, float] = {}
    words: dict[str, str] = {}

    def mark(axis: str, x: float, text: str) -> None:
        if x > 0:
            values[axis], words[axis] = x, text

    mark(UNSEEN_SOURCE, float(unseen_source), "a setup outside the fitted sources")
    fw_family = {s.group for s in support if s.framework == query.framework and s.family == query.family}
    mark(FRAMEWORK_GPU, float(not fw_family), f"{query.framework}: no fitted run of it on {query.family}")
    mark(
        FRAMEWORK_THIN,
        float(0 < len(fw_family) < THIN_SOURCES),
        f"{query.framework} on {query.family}: fitted runs from only {len(fw_family)} source(s)",
    )
    families = {s.family for s in support}
    mark(GPU_FAMILY, float(query.family not in families), f"GPU family {query.family}: no fitted run")
    gpus = {s.gpu for s in support}
    mark(GPU_VARIANT, float(query.family in families and gpu not in gpus), f"{gpu}: no fitted run of this GPU variant")
    same = [s for s in support if s.framework == query.framework and s.family == query.family]
    mark(
        PRECISION,
        float(bool(same) and all(s.precision != query.precision for s in same)),
        f"{query.precision}: no fitted {query.framework} run on {query.family} at this precision",
    )
    mark(
        MOE,
        float(query.moe and bool(same) and not any(s.moe for s in same)),
        f"MoE: no fitted MoE run of {query.framework} on {query.family}",
    )
    if same:
        top, bottom = max(s.gpus for s in same), min(s.gpus for s in same)
        steps = (
            math.log2(query.gpus / top)
            if query.gpus > top
            else math.log2(bottom / query.gpus)
            if query.gpus < bottom
            else 0.0
        )
        mark(
            SCALE,
            min(MAX_STEPS, steps),
            f"{query.gpus} GPUs beyond the fitted {query.framework} runs on {query.family} ({bottom}-{top})",
        )
    knob_steps, reasons = knob_distance(query, published, include_gpus=False)
    mark(KNOBS, min(MAX_STEPS, knob_steps), "; ".join(reasons))
    mark(STAND_IN, float(bool(stand_in)), f"priced through an approximation: {stand_in}")
    return Novelty(values, words)


@dataclass(frozen=True, slots=True)
class Widening:
    """Learned widening per axis (log units) and whether each was learned or kept its prior."""

    weights: dict[str, float]
    learned: dict[str, bool]

    def half_width(self, base: float, nov: Novelty) -> float:
        """H = sqrt(h^2 + sum x_a w_a^2)."""
        if not math.isfinite(base):
            return base
        return math.sqrt(base**2 + sum(x * self.weights[a] ** 2 for a, x in nov.values.items()))

    def describe(self, nov: Novelty) -> str:
        """The axes that widened the interval, each with its share, in words."""
        parts = []
        for a in AXES:
            if a in nov.values and self.weights[a] > 0:
                how = "" if self.learned[a] else ", judgement: too few sources to learn it"
                parts.append(f"{nov.words[a]} (+/-{math.expm1(self.weights[a] * math.sqrt(nov.values[a])):.0%}{how})")
        return "; ".join(parts)


def parse_widening(doc: dict[str, Any], kind: str) -> Widening:
    """The widening of `kind` (own: the project's own setups; unseen: every other query) from novelty.json."""
    w = doc["weights"][kind]
    return Widening({a: float(w[a]["value"]) for a in AXES}, {a: bool(w[a]["learned"]) for a in AXES})


@functools.cache
def _shipped() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((resources.files("optimizer.costmodel") / "novelty.json").read_text())
    return doc


@functools.cache
def shipped_widening(unseen: bool = True) -> Widening:
    """The shipped per-axis widening (novelty.json, written by `python -m accuracy.novelty_fit --write`): learned on
    the quarantine for a query from an unseen setup (every query a user makes), on the project's runs left out by
    source for the project's own runs."""
    return parse_widening(_shipped(), "unseen" if unseen else "own")


@functools.cache
def shipped_support() -> tuple[SupportRun, ...]:
    """The fitted step-time runs the axes are measured against (novelty.json `support`)."""
    return tuple(SupportRun(**s) for s in _shipped()["support"])
