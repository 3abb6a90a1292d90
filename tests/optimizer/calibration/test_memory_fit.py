"""The memory reserve is bounded by runs that ran [issue 33 §4]: a run fits in its GPUs, so the reserve cannot exceed
the device memory minus the run's predicted allocated peak; the fit says which runs bound it."""

from __future__ import annotations

from typing import Any

import pytest

from optimizer.calibration.fit import FitPoint, fit_calibration
from optimizer.calibration.memory_fit import fit_reserve, ran_bounds
from optimizer.costmodel.constants import CUDA_CONTEXT_BYTES
from optimizer.costmodel.estimate import estimate
from optimizer.spec.cluster_loading import load_cluster_preset
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.workload import TrainingWorkload
from tests.optimizer.helpers import llama405b_h100_512

MODEL = load_model_preset("llama-3.1-405b")
CLUSTER = load_cluster_preset("dgx-h100:64")
POOL = CLUSTER.pools[0].name
# Megatron's default fp32 main grads: stage 1 predicted at 84.6 GB allocated + 9.7 GB reserve on 85.9 GB.
FP32_GRADS = TrainingWorkload(global_batch_size=256, seq_len=8192)
ROOMY = TrainingWorkload(global_batch_size=256, seq_len=8192, grad_dtype="bf16")  # 71.9 GB allocated
CAPACITY_GB = CLUSTER.gpu_of(CLUSTER.pools[0]).memory_bytes / 1e9


def _run(label: str, w: TrainingWorkload, mbs: int = 1, **figures: Any) -> FitPoint:
    return FitPoint(label, MODEL, CLUSTER, w, llama405b_h100_512().model_copy(update={"mbs": mbs}), **figures)


def test_a_run_that_ran_bounds_the_reserve_and_then_fits() -> None:
    ran = _run("measurement 7 (plan 3)", FP32_GRADS, step_time_s=42.0)
    before = estimate(MODEL, CLUSTER, FP32_GRADS, ran.config)
    assert not before.feasible and before.memory_overrun_gb is not None and before.memory_overrun_gb > 5
    report = fit_calibration([ran])
    reserve = [c for c in report.constants if c.name == "memory_reserve"]
    assert len(reserve) == 1 and reserve[0].runs == 1 and "measurement 7 (plan 3)" in reserve[0].reason
    bound = (CAPACITY_GB - before.peak_allocated_gb - CUDA_CONTEXT_BYTES / 1e9) / CAPACITY_GB
    assert reserve[0].value == pytest.approx(bound, abs=1e-6) and 0 < bound < 0.01
    after = estimate(MODEL, CLUSTER.with_calibration(report.calibration), FP32_GRADS, ran.config)
    assert after.feasible and after.peak_memory_gb == pytest.approx(CAPACITY_GB, abs=0.01)


def test_an_overrun_the_reserve_cannot_absorb_is_named() -> None:
    """At micro-batch 2 the predicted allocated peak alone exceeds 80 GiB: the reserve goes to 0 and the report says
    an allocator term over-predicts that run (no reserve explains it)."""
    ran = _run("measurement 9 (plan 4)", FP32_GRADS, mbs=2, peak_allocated_gb=79.0)
    (bound,) = ran_bounds([ran])
    assert bound.stage == 1 and bound.fraction < 0 and bound.allocated_gb > CAPACITY_GB
    fit = fit_reserve([ran])[POOL]
    assert fit.value == 0.0 and fit.bounded_by == ("measurement 9 (plan 4)",)
    assert "allocator term over-predicts" in fit.reason


def test_runs_with_room_leave_the_reserve_alone_and_bound_measured_slack() -> None:
    assert fit_reserve([_run("roomy", ROOMY, step_time_s=21.0)]) == {}  # 15% of the GPU to spare: no bound binds
    # measured slack of 8% of capacity, but a run that ran leaves room for less: the run wins, both counted
    slack = _run("slack", ROOMY, peak_allocated_gb=70.0, peak_reserved_gb=70.0 + 0.08 * CAPACITY_GB)
    fit = fit_reserve([slack, _run("tight", FP32_GRADS, step_time_s=42.0)])[POOL]
    assert fit.measured == 1 and fit.runs == 2 and fit.bounded_by == ("tight",)
    assert fit.value < 0.01 and "tight ran" in fit.reason
    alone = fit_reserve([slack])[POOL]
    assert 0.08 < alone.value < 0.10 and alone.bounded_by == () and alone.reason == ""
