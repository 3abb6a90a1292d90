"""The edge of measured territory (optimizer/costmodel/published_mfu.py) is the published runs' best MFU per GPU
family and precision, and a prediction beyond it is flagged and widened (issue 44 §3)."""

from __future__ import annotations

import dataclasses
import math

from accuracy.plan_quality import _record_mfu, _record_precision
from accuracy.published_runs import _cluster, load_records
from optimizer.costmodel.estimate import estimate
from optimizer.costmodel.published_mfu import BEST_PUBLISHED_MFU, best_published
from optimizer.costmodel.uncertainty import RunFeatures, beyond_measured, with_intervals
from optimizer.spec.cluster_loading import build_cluster
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import TrainingWorkload


def test_table_is_the_published_maximum() -> None:
    best: dict[tuple[str, str], tuple[float, str]] = {}
    for rec in load_records():
        mfu = _record_mfu(rec)
        if mfu is None:
            continue
        cluster = _cluster(rec)
        key = (str(cluster.gpu_of(cluster.pools[0]).family), _record_precision(rec))
        if mfu > best.get(key, (0.0, ""))[0]:
            best[key] = (mfu, rec["id"])
    assert best.keys() == BEST_PUBLISHED_MFU.keys()
    for key, (mfu, rid) in best.items():
        assert math.isclose(BEST_PUBLISHED_MFU[key].mfu, mfu, abs_tol=1e-4) and BEST_PUBLISHED_MFU[key].record == rid


def test_beyond_the_best_published_mfu_is_flagged_and_widened() -> None:
    query = RunFeatures("megatron", "hopper", "bf16", False, 64, 4, 2, 8, 1, 1, 1, 1, "none", 1, "1f1b")
    assert beyond_measured(query, 0.45, 10.0) is None
    floor, why = beyond_measured(query, 0.60, 10.0) or (0.0, "")
    assert math.isclose(floor, 10.0 * 0.60 / 0.49) and "beyond measured territory" in why
    assert (
        best_published("volta", "fp16") is None
        and beyond_measured(dataclasses.replace(query, family="volta"), 0.9, 1) is None
    )
    cluster = build_cluster(
        {"name": "c", "pools": [{"name": "p", "gpu": "H100-SXM-80GB", "nodes": 1, "gpus_per_node": 8}]}
    )
    model, w = load_model_preset("llama-3-8b"), TrainingWorkload(global_batch_size=64, seq_len=4096)
    cfg = ParallelConfig(tp=2, dp=4, mbs=1, zero_stage=1)
    est = estimate(model, cluster, w, cfg)
    assert est.beyond_measured is None or est.mfu > 0.49
    hot = with_intervals(est.model_copy(update={"mfu": 0.7}), model, cluster, w, cfg)
    assert hot.beyond_measured and hot.step_time_interval_s is not None
    assert hot.step_time_interval_s[1] >= est.step_time_s * 0.7 / 0.49 * (1 - 1e-9)
    assert "beyond measured territory" in (hot.interval_basis or "")
