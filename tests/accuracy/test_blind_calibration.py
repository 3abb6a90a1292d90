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


def test_one_run_of_a_new_stack_teaches_its_bias() -> None:
    """Issue 45 §3: a 25% stack bias (compute 0.75) on a release the fit has not seen (torchtitan 0.2.1) is learnt from
    one run, since the compute prior of a new stack is the between-source spread; on a fitted stack (Megatron, no
    release stated) the same single run moves it less (the between-cluster prior)."""
    truth = ClusterCalibration(pools={CLUSTER.pools[0].name: PoolCalibration(compute=0.75)})
    model = load_model_preset("llama-3-8b")

    def one_run(workload: TrainingWorkload) -> float:
        rng = random.Random(45)
        configs = random_configs(model, CLUSTER, workload, 3, rng)
        points = synthetic_points(model, CLUSTER, workload, configs, truth, 0.01, rng)
        return blind(ClusterGroup("synthetic", "synthetic", tuple(points)), 1).median_after

    new_stack = one_run(W.model_copy(update={"framework": "torchtitan", "framework_version": "0.2.1"}))
    fitted_stack = one_run(W)
    assert new_stack < 0.08
    assert fitted_stack > new_stack + 0.05
