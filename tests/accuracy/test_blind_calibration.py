"""The blind protocol's machinery (accuracy/blind_calibration.py) on clusters whose truth is known: a uniform
compute bias is learnt from k runs and removed from the others; across models, a bias shared by the models
transfers."""

from __future__ import annotations

import random

from accuracy.blind_calibration import ClusterGroup, blind, cross_model
from accuracy.synthetic_fit import random_configs, synthetic_points
from optimizer.spec.calibration import ClusterCalibration, PoolCalibration
from optimizer.spec.cluster_loading import load_cluster_preset
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.workload import TrainingWorkload

CLUSTER = load_cluster_preset("dgx-h100:4")
W = TrainingWorkload(global_batch_size=128, seq_len=4096)
TRUTH = ClusterCalibration(pools={CLUSTER.pools[0].name: PoolCalibration(compute=0.8)})


def _group(models: list[str], per_model: int) -> ClusterGroup:
    rng = random.Random(8)
    points = []
    for name in models:
        model = load_model_preset(name)
        configs = random_configs(model, CLUSTER, W, per_model, rng)
        points += synthetic_points(model, CLUSTER, W, configs, TRUTH, 0.01, rng)
    return ClusterGroup("synthetic", "synthetic", tuple(points))


def test_two_runs_remove_a_uniform_bias_from_the_others() -> None:
    score = blind(_group(["llama-3-8b"], 5), 2)
    assert score.trials == 10 and len(score.after) == 30  # every pair, each predicting the other three
    assert score.median_before > 0.15  # the cluster computes at 80% of the sourced rate
    assert score.median_after < 0.05 and abs(score.bias_after) < 0.03
    assert score.worse_points < -10


def test_a_bias_shared_by_two_models_transfers_across_them() -> None:
    transfers = cross_model(_group(["llama-3-8b", "llama-2-13b"], 3))
    assert len(transfers) == 2 and all(t.source_model != t.target_model for t in transfers)
    assert {t.source_model for t in transfers} == {t.target_model for t in transfers}
    for t in transfers:
        assert max(abs(e) for e in t.after) < 0.5 * min(abs(e) for e in t.before)
