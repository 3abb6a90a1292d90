"""What changed between two plans: configuration, step time, memory and GPUs."""

from __future__ import annotations

from collections import Counter
from typing import Any

from pydantic import BaseModel, Field

from optimizer.search.fleet_result import FleetPlan
from optimizer.search.result import PlannedConfig


class KnobChange(BaseModel):
    """One configuration field whose value differs."""

    knob: str
    before: Any
    after: Any


class PlanDiff(BaseModel):
    """Plan `after` against plan `before` (the previous or a chosen one)."""

    changes: list[KnobChange] = Field(default_factory=list, description="Configuration fields that differ.")
    step_time_before_s: float | None = None
    step_time_after_s: float | None = None
    step_time_delta_s: float | None = Field(default=None, description="after - before, seconds.")
    step_time_delta_pct: float | None = Field(default=None, description="Relative to before, percent.")
    step_time_before_interval_s: tuple[float, float] | None = Field(
        default=None, description="80% interval of the step time before (out-of-sample errors), seconds."
    )
    step_time_after_interval_s: tuple[float, float] | None = Field(
        default=None, description="80% interval of the step time after, seconds."
    )
    peak_memory_delta_gb: float | None = Field(default=None, description="Per-GPU peak memory, after - before, GB.")
    gpus_before: int = 0
    gpus_after: int = 0
    gpus_by_pool: dict[str, int] = Field(default_factory=dict, description="GPUs gained (+) or lost (-) per pool.")
    feasibility: str | None = Field(default=None, description="Set when one side has no plan.")
    fleet_changes: list[str] = Field(
        default_factory=list,
        description="SLA fleets: replica groups whose count changed, e.g. 'h100 replica tp2: 6→5'.",
    )
    capacity_rate_before: float | None = Field(default=None, description="SLA fleets: requests/s within the targets.")
    capacity_rate_after: float | None = None

    def summary(self) -> str:
        if self.feasibility:
            return self.feasibility
        if self.fleet_changes or self.capacity_rate_after is not None:
            parts = list(self.fleet_changes)
            if self.gpus_after != self.gpus_before:
                parts.append(f"GPUs {self.gpus_before}→{self.gpus_after}")
            if self.capacity_rate_before and self.capacity_rate_after is not None:
                pct = 100 * (self.capacity_rate_after / self.capacity_rate_before - 1)
                parts.append(f"capacity {pct:+.1f}% requests/s")
            return ", ".join(parts) or "no change"
        parts = [f"{c.knob} {c.before}→{c.after}" for c in self.changes]
        if self.step_time_delta_pct is not None:
            band = self.step_time_after_interval_s
            within = ""
            if band is not None and self.step_time_after_s:
                half = 100 * (band[1] - band[0]) / (2 * self.step_time_after_s)
                within = f" (each prediction's 80% interval about ±{half:.0f}%)"
            parts.append(f"step time {self.step_time_delta_pct:+.1f}%{within}")
        if self.gpus_after != self.gpus_before:
            parts.append(f"GPUs {self.gpus_before}→{self.gpus_after}")
        return ", ".join(parts) or "no change"


def _pool_gpus(p: PlannedConfig) -> Counter[str]:
    """GPUs the plan uses in each pool (every stage holds tp x dp x cp GPUs)."""
    counts: Counter[str] = Counter()
    for stage in p.estimate.stages:
        counts[stage.pool] += p.config.tp * p.config.dp * p.config.cp
    return counts


def diff_plans(before: PlannedConfig | None, after: PlannedConfig | None) -> PlanDiff:
    """Knob changes, step time and peak memory deltas, GPUs gained or lost per pool."""
    if before is None or after is None:
        if before is None and after is None:
            return PlanDiff(feasibility="neither side has a feasible plan")
        side = "before" if before is None else "after"
        present = after if before is None else before
        assert present is not None
        d = PlanDiff(feasibility=f"no feasible plan {side}")
        if before is None:
            d.gpus_after = present.estimate.gpus
        else:
            d.gpus_before = present.estimate.gpus
        return d
    b, a = before.config.model_dump(), after.config.model_dump()
    changes = [KnobChange(knob=k, before=b[k], after=a[k]) for k in b if b[k] != a.get(k)]
    tb, ta = before.estimate.step_time_s, after.estimate.step_time_s
    pools_b, pools_a = _pool_gpus(before), _pool_gpus(after)
    by_pool = {p: pools_a.get(p, 0) - pools_b.get(p, 0) for p in sorted(set(pools_b) | set(pools_a))}
    return PlanDiff(
        changes=changes,
        step_time_before_s=tb,
        step_time_after_s=ta,
        step_time_delta_s=ta - tb,
        step_time_delta_pct=100.0 * (ta - tb) / tb if tb else None,
        step_time_before_interval_s=before.estimate.step_time_interval_s,
        step_time_after_interval_s=after.estimate.step_time_interval_s,
        peak_memory_delta_gb=after.estimate.peak_memory_gb - before.estimate.peak_memory_gb,
        gpus_before=before.estimate.gpus,
        gpus_after=after.estimate.gpus,
        gpus_by_pool={k: v for k, v in by_pool.items() if v},
    )


def _groups(f: FleetPlan) -> Counter[str]:
    """Replicas per group, named by pool, role and shape."""
    out: Counter[str] = Counter()
    for g in f.groups:
        sh = g.shape
        name = (
            f"{sh.pool} {sh.role} tp{sh.tp}"
            + (f" pp{sh.pp}" if sh.pp > 1 else "")
            + (f" dp{sh.dp} ep{sh.ep}" if sh.ep > 1 else "")
        )
        out[name] += g.count
    return out


def diff_fleets(before: FleetPlan, after: FleetPlan) -> PlanDiff:
    """Two SLA fleets: the replica groups whose count changed, GPUs per pool, the capacity within the targets."""
    gb, ga = _groups(before), _groups(after)
    changes = [f"{k}: {gb.get(k, 0)}→{ga.get(k, 0)}" for k in sorted(set(gb) | set(ga)) if gb.get(k, 0) != ga.get(k, 0)]
    pb: Counter[str] = Counter()
    pa: Counter[str] = Counter()
    for f, counts in ((before, pb), (after, pa)):
        for g in f.groups:
            counts[g.shape.pool] += g.count * g.shape.gpus
    by_pool = {p: pa.get(p, 0) - pb.get(p, 0) for p in sorted(set(pb) | set(pa))}
    return PlanDiff(
        fleet_changes=changes,
        gpus_before=before.gpus,
        gpus_after=after.gpus,
        gpus_by_pool={k: v for k, v in by_pool.items() if v},
        capacity_rate_before=before.capacity_rate,
        capacity_rate_after=after.capacity_rate,
    )
