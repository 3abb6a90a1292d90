"""The bound a search reports never lies above what it found, and the gap is stated wherever the plan is above the
bound (issue 48 §5: an OPTIMAL plan showed objective 31.16 above lower_bound 29.57 with gap null, and a running
job's bound sat above its best objective)."""

from __future__ import annotations

import pytest

from optimizer.search.planner import plan
from optimizer.search.result import Progress, proven_bound
from optimizer.spec.cluster_loading import load_cluster_preset
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.workload import InferenceWorkload, TrainingWorkload


@pytest.mark.parametrize(
    ("model", "cluster", "work"),
    [
        ("llama-3-8b", "dgx-h100:2", TrainingWorkload(global_batch_size=64, seq_len=4096)),
        ("llama-2-70b", "dgx-h100", InferenceWorkload(prompt_len=2048, output_len=256, batch=8)),
    ],
)
def test_progress_bound_never_above_best_and_gap_always_stated(
    model: str, cluster: str, work: TrainingWorkload | InferenceWorkload
) -> None:
    reports: list[Progress] = []
    r = plan(load_model_preset(model), load_cluster_preset(cluster), work, time_limit_s=30, progress=reports.append)
    assert r.status == "OPTIMAL" and r.objective_value is not None and r.lower_bound is not None
    assert r.lower_bound <= r.objective_value + 1e-12
    assert r.gap == pytest.approx((r.objective_value - r.lower_bound) / r.objective_value, abs=1e-12)
    assert reports and all(p.best is None or p.bound <= p.best + 1e-12 for p in reports), [
        (p.best, p.bound) for p in reports if p.best is not None and p.bound > p.best
    ]


def test_proven_bound() -> None:
    assert proven_bound(5.0, 4.0) == 4.0 and proven_bound(3.0, None) == 3.0 and proven_bound(5.0, 6.0, 2.0) == 2.0
