"""Errors of predicted RATIOS: two configurations of one setup share most of their error, so the planner's choice
between them rests on how well the model predicts their ratio, not their levels (issue 38 §2; docs/uncertainty.md
section 6).

Pairs of measured configurations of one setup:
- Megatron-Bridge: every pair of priced performance-summary rows of one container, model, GPU count, batch and
  sequence length (benchmarks/bridge_summary.py `same_setup_pairs`, ties included: a ratio near 1 is exactly what the
  interval is for). Nothing in the Bridge pricing is fitted per row; the source is the container (one measurement
  campaign each).
- Published sweeps: every pair of step-time records of one group of accuracy/data/published_runs.json with the same
  model, GPU, precision, global batch and sequence length (other knobs, GPU count included). Their predictions are the
  leave-one-group-out ones (accuracy/leave_out.py); the source is the group.

For each pair the ratio residual r = log(pred_a / pred_b) - log(meas_a / meas_b). The 80% interval of r is
`uncertainty.ratio_offsets` per regime (same GPU system or two; split conformal over both orientations); the pairs
and the intervals go into the `pairs` section of optimizer/costmodel/residuals.json (`python -m accuracy.leave_out
--write`).
"""

from __future__ import annotations

import math
from typing import Any

from accuracy.bridge_rows import priced_rows, same_setup_pairs
from accuracy.published_runs import load_records
from optimizer.costmodel.uncertainty import (
    ACROSS_GPUS,
    RATIO_METHOD,
    SAME_GPU,
    STEP_METRIC,
    PairResidual,
    Residual,
    ratio_offsets,
)

BRIDGE_SOURCE = "megatron_bridge_summary_{container}"


def bridge_pairs() -> list[PairResidual]:
    """The Megatron-Bridge same-setup pairs."""
    out = []
    for rec, a, b in same_setup_pairs(priced_rows()):
        assert a.predicted_s is not None and b.predicted_s is not None
        out.append(
            PairResidual(
                source=BRIDGE_SOURCE.format(container=rec["container"]),
                kind="bridge",
                a=f"{a.system} {a.label}",
                b=f"{b.system} {b.label}",
                same_gpu=a.system == b.system,
                predicted_ratio=a.predicted_s / b.predicted_s,
                measured_ratio=a.measured_s / b.measured_s,
            )
        )
    return out


def published_pairs(residuals: tuple[Residual, ...]) -> list[PairResidual]:
    """The pairs of step-time records within one published sweep, with their left-out predictions."""
    records = {r["id"]: r for r in load_records()}
    groups: dict[tuple[Any, ...], list[Residual]] = {}
    for r in residuals:
        if r.metric != STEP_METRIC or r.id not in records:
            continue
        rec = records[r.id]
        key = (
            r.group,
            rec["model"]["name"],
            rec["cluster"]["gpu_type"],
            rec["precision"],
            rec["batch"]["global_batch_size"],
            rec["model"].get("seq_len"),
        )
        groups.setdefault(key, []).append(r)
    out = []
    for members in groups.values():
        for i, a in enumerate(members):
            for b in members[i + 1 :]:
                pred_a, pred_b = (x.measured / math.exp(x.left_out) for x in (a, b))
                out.append(
                    PairResidual(
                        source=a.group,
                        kind="published",
                        a=a.id,
                        b=b.id,
                        same_gpu=True,
                        predicted_ratio=pred_a / pred_b,
                        measured_ratio=a.measured / b.measured,
                    )
                )
    return out


def pair_section(residuals: tuple[Residual, ...]) -> dict[str, Any]:
    """The `pairs` section of the residual table: every pair and the 80% interval of its ratio residual."""
    pairs = tuple(bridge_pairs() + published_pairs(residuals))
    intervals = {}
    for regime in (SAME_GPU, ACROSS_GPUS):
        low, high, n, k = ratio_offsets(pairs, regime)
        intervals[regime] = {"low": low, "high": high, "method": RATIO_METHOD, "pairs": n, "sources": k}
    return {
        "meta": {
            "residual": "log(predicted_ratio) - log(measured_ratio); ratio = step time of a over b",
            "pairs": "accuracy/pair_errors.py: Megatron-Bridge same-setup rows (source: container) and published "
            "sweeps within one group (source: group; left-out predictions)",
        },
        "intervals": intervals,
        "records": [
            {
                "source": p.source,
                "kind": p.kind,
                "a": p.a,
                "b": p.b,
                "same_gpu": p.same_gpu,
                "predicted_ratio": p.predicted_ratio,
                "measured_ratio": p.measured_ratio,
            }
            for p in pairs
        ],
    }
