"""The planner's objectives: one name per (mode, objective) and how each value reads to a person."""

from __future__ import annotations

from collections.abc import Callable

from optimizer.spec.workload import InferenceWorkload, TrainingWorkload

STEP_TIME = "step_time_s"
"""Training, objective step_time: seconds per optimizer step."""
PRICE_PER_STEP = "price_per_step"
"""Training, objective cost: the pools' price units per optimizer step."""
WALL_PER_USEFUL_STEP = "wall_s_per_useful_step"
"""Training, objective goodput: wall seconds per useful optimizer step (step time / goodput fraction)."""
TPOT = "tpot_s"
"""Serving, objective latency: seconds per output token."""
GPU_SECONDS_PER_TOKEN = "gpu_seconds_per_token"
"""Serving, objective throughput: GPU-seconds per output token."""
FLEET_GPUS = "fleet_gpus"
"""SLA plan, objective gpus: GPUs of the fleet that serves the rate."""
FLEET_PRICE = "fleet_price_per_hour"
"""SLA plan, objective cost: the fleet's price per hour."""
MAX_RATE = "max_requests_per_s"
"""SLA plan, objective max_rate: requests per second the allowed GPUs serve within the targets."""

LABELS = {
    STEP_TIME: "step time",
    PRICE_PER_STEP: "price per step",
    WALL_PER_USEFUL_STEP: "wall time per useful step",
    TPOT: "time per output token",
    GPU_SECONDS_PER_TOKEN: "GPU-seconds per output token",
    FLEET_GPUS: "GPUs serving the rate",
    FLEET_PRICE: "fleet price per hour",
    MAX_RATE: "requests per second within the SLA",
}


def objective_name(w: TrainingWorkload | InferenceWorkload) -> str:
    """The objective a workload is planned for."""
    if isinstance(w, TrainingWorkload):
        return {"cost": PRICE_PER_STEP, "goodput": WALL_PER_USEFUL_STEP}.get(w.objective, STEP_TIME)
    return {
        "latency": TPOT,
        "throughput": GPU_SECONDS_PER_TOKEN,
        "gpus": FLEET_GPUS,
        "cost": FLEET_PRICE,
        "max_rate": MAX_RATE,
    }[w.objective]


FORMATS: dict[str, Callable[[float], str]] = {
    STEP_TIME: lambda v: f"{v:.4g} s",
    PRICE_PER_STEP: lambda v: f"{v:.4g} per step",
    WALL_PER_USEFUL_STEP: lambda v: f"{v:.4g} s per useful step",
    TPOT: lambda v: f"{1000 * v:.3g} ms",
    GPU_SECONDS_PER_TOKEN: lambda v: f"{v:.4g} GPU-s/token",
    FLEET_GPUS: lambda v: f"{v:.0f} GPUs",
    FLEET_PRICE: lambda v: f"{v:.4g} per hour",
    MAX_RATE: lambda v: f"{v:.4g} req/s",
}
"""Each objective's value in its unit."""


def format_objective(name: str, value: float | None) -> str:
    """A value in its unit: '12.34 s', '0.0151 per step', '8.21 ms', '0.0123 GPU-s/token', '16 GPUs'."""
    if value is None:
        return "–"
    fmt = FORMATS.get(name)
    return fmt(value) if fmt is not None else f"{value:.4g}"
