"""The training-step terms of optimizer/costmodel/terms/ as units, against hand-computed values."""

from __future__ import annotations

import pytest

from optimizer.costmodel import network as net
from optimizer.costmodel.constants import MOE_EAGER_HOST_S
from optimizer.costmodel.terms.data_parallel import DataParallelGroups, Zero3Schedule, zero3_exposed
from optimizer.costmodel.terms.expert_parallel import eager_launch_gaps
from optimizer.costmodel.terms.offload import offload_exposed
from optimizer.costmodel.terms.pipeline import pipeline_fill
from optimizer.costmodel.terms.tensor_parallel import tp_collective_counts, tp_exposed
from optimizer.spec.gpu_catalog import resolve_gpu

NVLINK8 = (net.Level(8, 100e9, False, "nvlink"),)


def test_1f1b_fill_is_the_other_stages_times() -> None:
    # 4 stages of 1 s (F+B) each: the fill and drain are the 3 other stages' times [A22 §5 eq. 2]
    assert pipeline_fill("1f1b", 1, [1.0, 1.0, 1.0, 1.0], [0.0] * 4) == 3.0
    # unbalanced: sum 1+2+1+1 = 5 less the slowest 2
    assert pipeline_fill("1f1b", 1, [1.0, 2.0, 1.0, 1.0], [0.0] * 4) == 3.0


def test_interleaved_fill_shrinks_by_vp() -> None:
    assert pipeline_fill("interleaved-1f1b", 2, [1.0] * 4, [0.0] * 4) == 1.5
    assert pipeline_fill("interleaved-1f1b", 3, [1.0] * 4, [0.0] * 4) == 1.0


def test_zb_h1_fill_takes_f_plus_b_minus_w() -> None:
    # t = F+B = 1, W = 0.25: u = 1 - 2 x 0.25 = 0.5 per stage, the fill 3 x 0.5 [Q23 §3]
    assert pipeline_fill("zb-h1", 1, [1.0] * 4, [0.25] * 4) == 1.5


def _groups(params: float) -> DataParallelGroups:
    return DataParallelGroups(
        dense_levels=NVLINK8,
        expert_levels=(),
        dense_ranks=8,
        expert_ranks=1,
        dense_params=params,
        expert_params=0.0,
        grad_bytes=4,
        fp8_params=False,
    )


SCHEDULE = Zero3Schedule(collectives_per_layer=1, node_aggregation=True, overlap=0.0)


def test_zero3_without_compute_pays_every_collective() -> None:
    # No compute to hide under: 2 layers, each pass gathers bf16 weights (2 B), backward also reduce-scatters fp32
    # grads (4 B): gather + reduce (first / last) + n x (gather + gather + reduce).
    layers, params = 2, 1e9
    gather = net.all_gather(NVLINK8, params * 2.0 / layers)
    reduce = net.all_gather(NVLINK8, params * 4.0 / layers)
    expected = gather + reduce + layers * (gather + (gather + reduce))
    assert zero3_exposed(_groups(params), SCHEDULE, layers, 0.0, 0.0) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(("fwd", "bwd"), [(0.0, 0.0), (0.05, 0.1), (10.0, 20.0)])
def test_zero3_exposed_grows_with_the_bytes(fwd: float, bwd: float) -> None:
    times = [zero3_exposed(_groups(p), SCHEDULE, 4, fwd, bwd) for p in (1e8, 1e9, 1e10)]
    assert times[0] < times[1] < times[2]


def test_zero3_overlap_hides_under_compute() -> None:
    hidden = Zero3Schedule(collectives_per_layer=1, node_aggregation=True, overlap=1.0)
    assert zero3_exposed(_groups(1e9), hidden, 4, 10.0, 20.0) < zero3_exposed(_groups(1e9), SCHEDULE, 4, 10.0, 20.0)


def test_tp_collective_counts() -> None:
    none: frozenset[str] = frozenset()
    assert tp_collective_counts(False, 1, False, False, none) == (2, 2.0)  # 2 forward, 2 backward [S19 §3]
    assert tp_collective_counts(False, 1, True, False, none) == (2, 4.0)  # + 2 with full recompute
    assert tp_collective_counts(True, 1, False, False, none) == (1, 1.0)  # MoE, etp 1: the attention's only
    assert tp_collective_counts(False, 1, False, True, none) == (2, 3.0)  # op-level SAC gathers again
    assert tp_collective_counts(False, 1, False, False, frozenset({"mlp"})) == (2, 3.0)


def test_tp_exposed_without_overlap_is_every_collective() -> None:
    assert tp_exposed(0.01, 2, 4.0, 1.0, 8, False, 1.0) == (0.02, 0.04)
    # with overlap and long GEMMs one chunk of tp stays exposed
    f, b = tp_exposed(0.01, 2, 4.0, 1.0, 8, True, 1.0)
    assert f < 0.02 and b < 0.04


def test_eager_launch_gaps() -> None:
    assert eager_launch_gaps(0.0) == (MOE_EAGER_HOST_S / 3, 2 * MOE_EAGER_HOST_S / 3)
    assert eager_launch_gaps(1.0) == (0.0, 0.0)


def test_offload_exposes_what_the_pass_cannot_cover() -> None:
    gpu = resolve_gpu("GB200")
    assert gpu.host_gbytes_per_s == 450  # NVLink-C2C
    moved = 450e9 * 0.1  # 0.1 s each way
    off_f, off_b = offload_exposed(gpu, moved, 0.04, 0.2)
    assert off_f == pytest.approx(0.06)
    assert off_b == 0.0
