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
from service.plans import planned, specs_of
from store.repositories.measurements import CalibrationRepository, calibration_spec
from store.repositories.plans import PlanRepository


def _posterior(calibration: ClusterCalibration | None, report: dict[str, Any], pools: list[str]) -> Posterior:
    """The stored fit's posterior (rebuilt from its runs' sensitivities), or the sourced prior."""
    if calibration is None:
        return prior_posterior(None, pools)
    constants = [ConstantFit.model_validate(c) for c in report.get("constants", [])]
    runs = [RunFit.model_validate(r) for r in report.get("runs", [])]
    return posterior_from_report(calibration, constants, runs, pools)


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
    req = NextMeasurementRequest(
        model=specs.model,
        cluster=specs.cluster,
        workload=specs.workload,
        config=best.config,
        calibration=calibration,
        posterior=_posterior(calibration, row.report if row is not None else {}, pools),
        run_spread=run_spread_of(calibration),
        steps=steps,
        top=top,
    )
    return next_measurement(req)
