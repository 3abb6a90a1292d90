"""What the planner returns (the JSON of `meshplan plan --json`)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field

from optimizer.costmodel.result import Estimate, Goodput
from optimizer.placement.result import Placement
from optimizer.search.decision import contains_zero
from optimizer.search.fleet_result import FleetPlan
from optimizer.search.replan_decision import ReplanDecision
from optimizer.spec.parallel_config import ParallelConfig


class PlannedConfig(BaseModel):
    """A configuration with its estimate (as `meshplan estimate --json` prints it)."""

    config: ParallelConfig
    estimate: Estimate


class Alternative(PlannedConfig):
    """A runner-up that differs from the plan in the main knobs."""

    delta_s: float = Field(description="Objective minus the plan's, in the objective's unit (seconds for times).")
    delta_pct: float = Field(description="Relative to the plan's objective, percent.")
    differs_in: list[str] = Field(description="Main knobs whose value differs from the plan's.")
    delta_interval_pct: tuple[float, float] | None = Field(
        default=None,
        description="80% interval of the true difference from the plan, percent, given the predicted one "
        "(training: from same-setup pairs of measured configurations, docs/uncertainty.md section 6); None for "
        "serving.",
    )
    indistinguishable: bool = Field(
        default=False, description="The difference interval contains 0: the order against the plan is not known."
    )

    @classmethod
    def versus(
        cls,
        estimate: Estimate,
        cfg: ParallelConfig,
        objective: float,
        best: ParallelConfig,
        best_objective: float,
        knobs: tuple[str, ...],
        interval_pct: tuple[float, float] | None = None,
    ) -> Alternative:
        """A runner-up described against the plan (`interval_pct`: the difference's 80% interval, when known)."""
        return cls(
            config=cfg,
            estimate=estimate,
            delta_s=objective - best_objective,
            delta_pct=100 * (objective - best_objective) / best_objective,
            differs_in=[k for k in knobs if getattr(cfg, k) != getattr(best, k)],
            delta_interval_pct=interval_pct,
            indistinguishable=interval_pct is not None and contains_zero(interval_pct),
        )


class BindingConstraint(BaseModel):
    """A resource the plan runs close to."""

    kind: str = Field(description="memory | gpus | pin")
    detail: str
    share: float = Field(description="Used share of the resource (0-1).")


class Explanation(BaseModel):
    """Why this plan."""

    summary: str
    binding: list[BindingConstraint] = Field(default_factory=list)
    time_breakdown: dict[str, float] = Field(default_factory=dict, description="Seconds per term.")
    versus_runner_up: str | None = None
    infeasible: InfeasibilityReport | None = None


class Suggestion(BaseModel):
    """A change that would make a plan exist."""

    change: str
    detail: str


class InfeasibilityReport(BaseModel):
    """Why nothing fits, and the smallest changes that would."""

    resource: str
    detail: str
    suggestions: list[Suggestion] = Field(default_factory=list)


class FrameworkOutcome(BaseModel):
    """One framework's best plan when the workload's framework is `auto`."""

    framework: str
    status: str
    objective_value: float | None = None
    versus_best_pct: float | None = Field(default=None, description="Objective over the winner's, minus 1, percent.")


ScenarioKind = Literal["node", "two_nodes", "nvlink_domain", "leaf_switch", "pool"]
SCENARIO_KINDS: tuple[ScenarioKind, ...] = ("node", "two_nodes", "nvlink_domain", "leaf_switch", "pool")


class Fallback(BaseModel):
    """A training plan's plan after losing some nodes, computed with the plan (optimizer/search/fallbacks.py)."""

    scenario: ScenarioKind = Field(
        description="What is lost: one node, two nodes, one whole NVLink domain, one leaf switch's nodes (of the "
        "pool named), or the whole pool (clusters of several pools)."
    )
    pool: str = Field(description="The pool that loses the nodes.")
    label: str = Field(description="The scenario in words, e.g. 'one node of pool h100 (h100-127)'.")
    lost_nodes: list[str] = Field(description="The healthy nodes the scenario takes away (plan hosts first).")
    healthy_gpus: dict[str, int] = Field(description="Healthy GPUs per pool after the loss, count.")
    config: ParallelConfig | None = Field(
        default=None, description="The fallback's configuration; None: nothing of this kind fits after the loss."
    )
    step_time_s: float | None = Field(default=None, description="Its estimated step time on the reduced inventory, s.")
    tokens_per_s: float | None = Field(default=None, description="Tokens trained per second, tokens/s.")
    gpus: int | None = Field(default=None, description="GPUs it runs on, count.")
    peak_memory_gb: float | None = Field(default=None, description="Per-GPU peak memory, GB.")
    step_time_delta_pct: float | None = Field(
        default=None, description="Step time against the running plan's, percent (+: slower)."
    )
    diff: str = Field(description="What changes against the running plan, e.g. 'dp 32→31, step time +3.3%'.")
    checkpoint_compatible: bool = Field(
        description="The running plan's checkpoint loads as is: same tp, pp, cp, ep (fewer data-parallel replicas, "
        "the global batch kept by more accumulation) and a framework whose checkpoint reshards over DP on load."
    )
    preferred: bool = Field(
        description="The one to switch to for this scenario: the checkpoint-compatible fallback unless a reshaped "
        "one is significantly faster (optimizer/search/keep_or_switch.py weigh, the watch's default threshold)."
    )
    reshard: str = Field(description="What loading the running plan's checkpoint takes under this configuration.")
    reshard_cost_s: float | None = Field(
        default=None,
        description="Extra seconds before training resumes for an offline checkpoint conversion (0: the load "
        "reshards); None: not estimated.",
    )
    goodput_tokens_per_s: float | None = Field(
        default=None,
        description="Expected useful tokens per second after failures, checkpoints and restarts on the scenario's "
        "inventory (optimizer/costmodel/goodput.py); None: no configuration fits.",
    )
    searched: bool = Field(
        default=False, description="A reshaped plan was searched for this scenario (or one of the same GPU counts)."
    )
    compute_time_s: float = Field(
        description="Seconds spent on this scenario (its compatible fallback, its share of a shared search, the "
        "re-pricing), on the scenario's first entry; 0 on its reshaped entry."
    )


class PlanResult(BaseModel):
    """The planner's answer."""

    status: str = Field(
        description="OPTIMAL (proven), FEASIBLE (time limit or an unproven sub-solve; see gap), INFEASIBLE (nothing "
        "fits: proven), UNKNOWN (no plan found within the limit; nothing is claimed) or REPORTED (a configuration "
        "the user reports as run, planned as given without a search; any memory overrun stated in its estimate)."
    )
    objective: str = Field(
        description="step_time_s, price_per_step (training cost), wall_s_per_useful_step (training goodput), tpot_s "
        "or gpu_seconds_per_token (throughput)."
    )
    objective_value: float | None = None
    lower_bound: float | None = Field(default=None, description="Proven lower bound on the objective.")
    gap: float | None = Field(
        default=None,
        description="(objective_value - lower_bound) / objective_value whenever there is a plan: 0 when the plan is "
        "the proven optimum; above 0 on FEASIBLE (not proven) or, on OPTIMAL, when the decision rule picked a plan "
        "its interval cannot tell from the optimum (explanation.decision) [issue 48 §5].",
    )
    plan: PlannedConfig | None = None
    price_per_step: float | None = Field(
        default=None,
        description="Training: the plan's GPUs x their pools' price_per_gpu_hour x step time, when every pool it "
        "uses has a price (the currency of the prices).",
    )
    framework: str | None = Field(
        default=None, description="Training: the framework the plan runs on (exports use it); None for serving."
    )
    framework_comparison: list[FrameworkOutcome] = Field(
        default_factory=list, description="With framework auto: every framework's best, the winner first."
    )
    goodput: Goodput | None = Field(
        default=None,
        description="Training: the plan's checkpoint size, write and load times, optimal checkpoint interval, hours "
        "lost per day to checkpoints, rework and restarts, and useful tokens per second (optimizer/costmodel/"
        "goodput.py); None for serving.",
    )
    alternatives: list[Alternative] = Field(default_factory=list)
    fleet: FleetPlan | None = Field(
        default=None, description="SLA plans: the serving fleet (replica shapes, counts, latency, price)."
    )
    explanation: Explanation
    solve_time_s: float
    phase_times_s: dict[str, float] = Field(
        default_factory=dict,
        description="Training searches: where solve_time_s went, seconds: candidates (enumeration and bounds), "
        "layouts (each candidate's stage tables and model), cp-sat (inside CP-SAT), pricing (the kept plans' "
        "estimates: goodput and intervals), decision (the interval rule and the explanation), placement.",
    )
    candidates_total: int = Field(description="Global-knob candidates in the declared space after bounds.")
    candidates_solved: int = Field(description="Candidates whose stage layout CP-SAT solved.")
    rounding_note: str = (
        "CP-SAT works in integer nanoseconds; the plan's objective equals `meshplan estimate` of its configuration "
        "to within 1 microsecond."
    )
    placement: Placement | None = Field(
        default=None,
        description="Training: which host runs which ranks (optimizer/placement), with where it falls short of the "
        "idealised fabric (`degraded`); the plan's estimate prices this placement. None for serving.",
    )
    decision: ReplanDecision | None = Field(
        default=None,
        description="A watch's re-plan: whether the running layout was kept, switched or shrunk, and why "
        "(optimizer/search/keep_or_switch.py); None for other plans.",
    )
    fallbacks: list[Fallback] = Field(
        default_factory=list,
        description="Training: the plans after losing one node, two nodes, an NVLink domain or a leaf switch "
        "(optimizer/search/fallbacks.py), computed after the plan; empty when not computed.",
    )
    fallbacks_time_s: float | None = Field(
        default=None, description="Seconds spent computing the fallbacks, beyond solve_time_s; None: not computed."
    )
    started_from_fallback: FallbackStart | None = Field(
        default=None,
        description="A re-plan after lost nodes that matched a stored fallback: the fallback answered first.",
    )


class FallbackStart(BaseModel):
    """A re-plan that began from the previous plan's stored fallback for the nodes the inventory lost."""

    plan_id: int | None = Field(default=None, description="The plan whose fallback matched.")
    scenario: ScenarioKind = Field(description="The matched fallback's scenario.")
    label: str = Field(description="The matched scenario in words.")
    matched_by: Literal["nodes", "gpu_counts"] = Field(
        description="nodes: the same nodes were lost; gpu_counts: the same healthy GPUs per pool remain."
    )
    config: ParallelConfig = Field(description="The fallback's configuration, the immediate answer and warm start.")
    step_time_s: float | None = Field(
        default=None, description="The fallback priced on the new inventory, s; None: it no longer fits there."
    )
    time_to_answer_s: float = Field(
        description="Seconds to the fallback's priced answer: matching the lost nodes against the stored "
        "fallbacks and pricing the match on the new inventory."
    )
    search_time_s: float = Field(description="Seconds the warm-started search took after it.")


Explanation.model_rebuild()
PlanResult.model_rebuild()


@dataclass
class Progress:
    """Reported while a solve runs (at most once per candidate)."""

    best: float | None
    bound: float
    elapsed_s: float
    solved: int


ProgressFn = Callable[[Progress], None]


def proven_bound(open_bound: float, best: float | None, unproven: float = math.inf) -> float:
    """What a running search has proven about the optimum: below the least open candidate's bound, an unproven
    sub-solve's bound and the best plan found (the next open bound can lie above the best plan just before the
    search ends) [issue 48 §5: a running job's bound sat above its best_objective]."""
    return min(open_bound, unproven, best if best is not None else math.inf)


def relative_gap(value: float | None, bound: float | None) -> float | None:
    """PlanResult.gap: (value - bound) / value, at least 0 (a plan the decision rule picked above the proven
    optimum keeps its gap on OPTIMAL [issue 48 §5]); None without a plan's value or a bound."""
    if not value or bound is None:
        return None
    return max(0.0, (value - bound) / value)


def no_plan_within_limit(stopped: str | None, time_limit_s: float) -> Explanation:
    """The explanation of an UNKNOWN answer (no plan, nothing claimed): the search was cancelled (`stopped` is
    "cancelled"), ran out of time (any other `stopped`), or finished with a candidate's solve left unproven."""
    why = (
        "the search was cancelled"
        if stopped == "cancelled"
        else f"the time limit of {time_limit_s:g} s ran out"
        if stopped
        else "a candidate's layout solve stopped before its proof"
    )
    return Explanation(summary=f"No plan found within the limit: {why} before any plan was found.")
