"""The serving time breakdown adds up to the step (prefill included) [issue 48 item 5: its shares summed to 64%]."""

from __future__ import annotations

import pytest

from optimizer.costmodel.estimate import estimate
from optimizer.spec.cluster_loading import load_cluster_preset
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import InferenceWorkload


@pytest.mark.parametrize(("prompt", "tp", "pp"), [(4096, 8, 1), (128, 4, 2)])
def test_breakdown_shares_sum_to_the_step(prompt: int, tp: int, pp: int) -> None:
    model = load_model_preset("llama-3-70b")
    cluster = load_cluster_preset("dgx-h100")
    w = InferenceWorkload(prompt_len=prompt, output_len=256, batch=8)
    est = estimate(model, cluster, w, ParallelConfig(tp=tp, pp=pp))
    total = sum(est.breakdown.model_dump().values())
    assert total == pytest.approx(est.step_time_s, rel=0.01)
    # The terms themselves account for it (the prefill counted, not absorbed by the remainder): before, 71%.
    assert est.breakdown.bubble < 0.05 * est.step_time_s
