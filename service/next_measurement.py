"""The next measurement of a training plan [issue 33 §3]: which short run or acceptance test would narrow its
predicted step time the most per GPU-hour, with the cluster's current calibration (optimizer/calibration/
next_measurement.py does the arithmetic)."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from optimizer.calibration.fit import ConstantFit, RunFit
from optimizer.calibration.next_measurement import (
    DEFAULT_STEPS,
    NextMeasurement,
    NextMeasurementRequest,
    Posterior,
    next_measurement,
    posterior_from_report,
    prior_posterior,
    run_spread_of,
)
from optimizer.errors import DomainError
from optimizer.frameworks.validation import assign_pools
from optimizer.spec.calibration import ClusterCalibration
from optimizer.spec.workload import TrainingWorkload
from service.acceptance import acceptance_priors
from service.plans import planned, specs_of
from store.repositories.measurements import CalibrationRepository, calibration_spec
from store.repositories.plans import PlanRepository


def _posterior(
    s: Session, cluster_id: int, calibration: ClusterCalibration | None, report: dict[str, Any], pools: list[str]
) -> tuple[Posterior, list[str]]:
    """The stored fit's posterior (rebuilt from its runs' sensitivities), or the prior the fit would start from
    (the cluster's acceptance tests where it has them); with the constants an acceptance test already set."""
    if calibration is None:
        priors = acceptance_priors(s, cluster_id)
        tested = [f"{pool}.{name}" for pool, consts in priors.items() for name in consts]
        return prior_posterior(None, pools, priors), tested
    constants = [ConstantFit.model_validate(c) for c in report.get("constants", [])]
    runs = [RunFit.model_validate(r) for r in report.get("runs", [])]
    tested = [f"{c.pool}.{c.name}" for c in constants if c.prior_source != "sourced"]
    return posterior_from_report(calibration, constants, runs, pools), tested


def plan_next_measurement(s: Session, plan_id: int, steps: int = DEFAULT_STEPS, top: int = 10) -> NextMeasurement:
    """The ranked next measurements for training plan `plan_id` on its cluster's current calibration."""
    plan = PlanRepository(s).get(plan_id)
    specs = specs_of(s, plan)
    if not isinstance(specs.workload, TrainingWorkload) or plan.result.get("fleet"):
        raise DomainError(
            "plan",
            f"plan {plan_id} is a serving plan: the next measurement is for training plans (the calibration fits "
            "training step times)",
        )
    best = planned(plan)
    if best is None:
        raise DomainError("plan", f"plan {plan_id} is {plan.solver_status}: it has no configuration to measure")
    row = CalibrationRepository(s).current(plan.cluster_id)
    calibration = calibration_spec(row)
    pools = list(dict.fromkeys(p.name for p in assign_pools(specs.cluster, best.config)))
    posterior, tested = _posterior(s, plan.cluster_id, calibration, row.report if row is not None else {}, pools)
    req = NextMeasurementRequest(
        model=specs.model,
        cluster=specs.cluster,
        workload=specs.workload,
        config=best.config,
        calibration=calibration,
        posterior=posterior,
        run_spread=run_spread_of(calibration, specs.model),
        steps=steps,
        top=top,
        tested=tested,
    )
    return next_measurement(req)
