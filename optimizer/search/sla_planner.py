"""SLA plans as the planner's answer (a PlanResult): the fleet, the main replica's configuration and estimate, and
an explanation in serving words; an infeasible SLA names the bound and the smallest relaxation."""

from __future__ import annotations

from optimizer.costmodel.estimate import estimate
from optimizer.search.fleet_result import FleetPlan
from optimizer.search.request import SearchRequest
from optimizer.search.result import (
    Explanation,
    InfeasibilityReport,
    PlannedConfig,
    PlanResult,
    Suggestion,
    no_plan_within_limit,
    relative_gap,
)
from optimizer.search.serving_fleet import plan_fleet
from optimizer.spec.objectives import objective_name
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import InferenceWorkload


def plan_sla(req: SearchRequest[InferenceWorkload]) -> PlanResult:
    """The fleet that serves w.rate within w.ttft_ms / w.tpot_ms at the fewest GPUs or lowest price, or the most
    requests/s within the targets (objective max_rate)."""
    model, cluster, w, time_limit_s = req.model, req.cluster, req.workload, req.time_limit_s
    out = plan_fleet(req)
    objective = objective_name(w)
    counts = {
        "solve_time_s": out.elapsed_s,
        "candidates_total": out.shapes_priced,
        "candidates_solved": out.shapes_priced,
    }
    if out.plan is None:
        if out.status == "UNKNOWN":
            return PlanResult(
                status="UNKNOWN",
                objective=objective,
                explanation=no_plan_within_limit(out.reason or "time limit", time_limit_s),
                **counts,
            )
        field = out.field or "sla"
        report = InfeasibilityReport(
            resource="latency" if field in ("ttft_ms", "tpot_ms") else "gpus" if field == "rate" else "memory",
            detail=f"{field}: {out.reason}",
            suggestions=[Suggestion(change=f"relax {field}", detail=out.reason or "")],
        )
        return PlanResult(
            status="INFEASIBLE",
            objective=objective,
            explanation=Explanation(summary=f"No fleet meets the SLA: {report.detail}", infeasible=report),
            **counts,
        )
    fleet = out.plan
    main = max(fleet.groups, key=lambda g: (g.shape.role != "prefill", g.count * g.shape.gpus))
    shape = main.shape
    cfg = ParallelConfig(
        tp=shape.tp,
        pp=shape.pp,
        dp=shape.dp,
        ep=shape.ep,
        etp=1 if shape.ep > 1 else None,
        ep_comm_overlap=shape.overlap,
        stage_pools=[shape.pool] * shape.pp,
    )
    # The estimate of one replica at its planned load (sequences per attention-DP rank). An aggregated fleet
    # spreads the served rate over its replicas in proportion to what each sustains: the main replica's share is
    # simulated for its TTFT/TPOT percentiles (Estimate.load_latency); a disaggregated fleet's replicas are not
    # whole servers, so none is simulated.
    batch = max(1, round(shape.concurrency / shape.dp))
    replicas = 1 if cfg.ep > 1 else cfg.dp  # estimate spreads a workload rate over these
    share = fleet.served_rate * shape.rate / fleet.capacity_rate if fleet.capacity_rate > 0 else 0.0
    aggregated = fleet.mode == "aggregated" and share > 0
    update: dict[str, object] = {"batch": batch}
    if aggregated:
        update["rate"] = share * replicas
    est = estimate(model, cluster, w.model_copy(update=update), cfg, latency=aggregated)
    return PlanResult(
        status=out.status,
        objective=objective,
        objective_value=out.objective_value,
        lower_bound=out.lower_bound,
        gap=relative_gap(out.objective_value, out.lower_bound or out.objective_value),
        plan=PlannedConfig(config=cfg, estimate=est),
        fleet=fleet,
        explanation=Explanation(summary=describe_fleet(fleet, w)),
        **counts,
    )


def describe_fleet(fleet: FleetPlan, w: InferenceWorkload) -> str:
    """One paragraph: the groups, the latency at the planned load, throughput and price."""
    parts = [
        f"{g.count} x {g.shape.role} {g.shape.gpu} tp{g.shape.tp}"
        + (f" pp{g.shape.pp}" if g.shape.pp > 1 else "")
        + (f" dp{g.shape.dp}" if g.shape.dp > 1 else "")
        + (f" ep{g.shape.ep}" if g.shape.ep > 1 else "")
        + f" ({g.shape.rate:.3g} req/s each)"
        for g in fleet.groups
    ]
    price = (
        f"; {fleet.price_per_hour:.4g} per hour, {fleet.price_per_million_tokens:.4g} per million output tokens"
        if fleet.price_per_hour is not None and fleet.price_per_million_tokens is not None
        else ""
    )
    targets = ", ".join(
        t
        for t in (
            f"TTFT p90 <= {w.ttft_ms:g} ms" if w.ttft_ms else "",
            f"TPOT <= {w.tpot_ms:g} ms" if w.tpot_ms else "",
        )
        if t
    )
    return (
        f"{fleet.mode.capitalize()} fleet of {fleet.gpus} GPUs: {'; '.join(parts)}. Serves {fleet.served_rate:.4g} "
        f"requests/s (capacity {fleet.capacity_rate:.4g}) of {w.prompt_len} prompt and {w.output_len} output tokens"
        f"{' within ' + targets if targets else ''}: TTFT p90 {fleet.ttft_p90_s * 1000:.0f} ms, TPOT "
        f"{fleet.tpot_s * 1000:.1f} ms at capacity, {fleet.output_tokens_per_s_per_gpu:.0f} output tokens/s per GPU"
        f"{price}. {fleet.why}."
    )
