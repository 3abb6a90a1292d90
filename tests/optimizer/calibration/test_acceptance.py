"""Acceptance tests turned into measured-vs-sourced figures and priors: a run written in the tool's own format at a
known figure gives the expected factor on the tier it binds, and the fit with no training run returns them."""

from __future__ import annotations

from pathlib import Path

import pytest

from optimizer.calibration.acceptance import AcceptanceFigure, PoolRun, evaluate, figures_of, gemm_figures, nccl_figures
from optimizer.calibration.fit import fit_calibration
from optimizer.calibration.gemm_bench import parse_gemm_bench
from optimizer.calibration.nccl_tests import parse_nccl_tests
from optimizer.errors import DomainError
from optimizer.spec.cluster_loading import build_cluster, load_cluster_preset
from optimizer.spec.cluster_spec import ClusterSpec
from tests.optimizer.calibration.gemm_output import A100, H100, mamf_output
from tests.optimizer.calibration.nccl_output import nccl_output

DGX = load_cluster_preset("dgx-h100:4")  # NVLink 450 GB/s x 0.80 = 360; 8 x 400 Gb/s NICs: 46 GB/s per GPU x 8
NCCL = Path(__file__).parent / "nccl"
GEMM = Path(__file__).parent / "gemm"


def _nccl(collective: str, hosts: int, per_host: int, busbw: float, **kw: object) -> PoolRun:
    """A run of the dgx-h100 pool at `busbw` for large messages (5 us latency: the plateau is within 0.1%)."""
    text = nccl_output(collective, hosts, per_host, busbw, **{"latency_us": 5.0, **kw})  # type: ignore[arg-type]
    return PoolRun("dgx-h100", parse_nccl_tests(text))


def _bandwidth(test: PoolRun, intra: float = 1.0, cluster: ClusterSpec = DGX) -> AcceptanceFigure:
    return figures_of(test, cluster, intra)[0]


def test_single_node_pins_the_nvlink_factor() -> None:
    fig = _bandwidth(_nccl("all_gather", 1, 8, 324.0))
    assert fig.constant == "intra_node" and fig.tier == "nvlink" and fig.unit == "GB/s"
    assert fig.sourced == pytest.approx(360.0) and fig.factor == pytest.approx(0.90, rel=2e-3)
    assert 0.03 <= fig.spread < 0.035 and fig.note == ""


def test_multi_node_pins_the_nics_at_the_node_rate() -> None:
    """A ring across nodes runs one channel per NIC: its busbw is the node's NIC rate (46 GB/s per GPU x 8)."""
    fig = _bandwidth(_nccl("all_reduce", 4, 8, 331.2))
    assert fig.constant == "network" and fig.tier == "network"
    assert fig.sourced == pytest.approx(368.0) and fig.factor == pytest.approx(0.90, rel=2e-3)
    # The cost model itself adds the hierarchical all-reduce's NVLink and NIC phases: it prices this run lower.
    assert fig.modelled is not None and 200 < fig.modelled < 240


@pytest.mark.parametrize(
    ("collective", "hosts", "per_host", "busbw", "sourced"),
    [
        ("alltoall", 2, 8, 77.625, 86.25),  # what leaves a node, over each GPU's NIC share: 46 x (15/16) / (8/16)
        ("sendrecv", 2, 1, 41.4, 46.0),  # the crossing pair: one GPU's NIC share
        ("reduce_scatter", 2, 4, 165.6, 184.0),  # half the node's GPUs: half its NICs
    ],
)
def test_other_collectives_and_group_shapes(
    collective: str, hosts: int, per_host: int, busbw: float, sourced: float
) -> None:
    fig = _bandwidth(_nccl(collective, hosts, per_host, busbw))
    assert fig.constant == "network" and fig.sourced == pytest.approx(sourced)
    assert fig.factor == pytest.approx(0.90, rel=3e-3)


def test_a_run_bound_by_another_tier_pins_nothing() -> None:
    """Twice the NICs: the cost model's NVLink (360) binds a multi-node ring before the NICs (736)."""
    fat = build_cluster(
        {
            "pools": [
                {"name": "dgx-h100", "gpu": "H100-SXM-80GB", "nodes": 4, "gpus_per_node": 8,
                 "inter_node": {"nics_per_node": 16, "gbits_per_s": 400}}
            ]
        }
    )  # fmt: skip
    fig = _bandwidth(_nccl("all_gather", 2, 8, 365.0), cluster=fat)
    assert fig.constant is None and fig.factor is None and "bound by nvlink" in fig.note
    # With the pool's measured NVLink factor the NICs bind and are pinned.
    fig = _bandwidth(_nccl("all_gather", 2, 8, 365.0), intra=1.2, cluster=fat)
    assert fig.constant == "network" and fig.factor == pytest.approx(365.0 / 736.0, rel=3e-3)


def test_nvlink_sharp_pins_nothing_and_bounds_are_said() -> None:
    """A single-node all_reduce on DGX H100 runs NVLS (the switch reduces): the cost model prices TP collectives on
    the links, so it moves no constant (it pinned intra_node = 1.33: issue 48 §7); the same node's all_gather
    does, and a run above the links' line rate pins nothing either."""
    nvls = _bandwidth(PoolRun("dgx-h100", parse_nccl_tests((NCCL / "all_reduce_8xH100.txt").read_text())))
    assert nvls.factor is None and nvls.constant is None and "NVLS" in nvls.note and "all_gather_perf" in nvls.note
    assert nvls.measured == pytest.approx(478.53) and nvls.sourced == pytest.approx(360.0)  # still shown
    assert _bandwidth(_nccl("all_gather", 1, 8, 324.0)).constant == "intra_node"
    a100 = build_cluster({"pools": [{"name": "dgx-h100", "gpu": "A100-SXM-80GB", "nodes": 1, "gpus_per_node": 8}]})
    ring = _bandwidth(_nccl("all_reduce", 1, 8, 216.0, gpu="NVIDIA A100-SXM4-80GB"), cluster=a100)  # no NVLS
    assert ring.constant == "intra_node" and ring.factor == pytest.approx(216.0 / 240, rel=2e-3), ring
    above = _bandwidth(_nccl("all_gather", 1, 8, 470.0))  # faster than 450 GB/s of NVLink
    assert above.factor is None and "line rate" in above.note
    broken = _bandwidth(_nccl("all_reduce", 4, 8, 18.4))  # a fifth of a NIC: below the constant's range
    assert broken.factor == 0.1 and "held at the bound 0.1" in broken.note


def test_nvl72_domain_spanning_trays_is_intra_node() -> None:
    nvl = load_cluster_preset("gb200-nvl72")
    run = parse_nccl_tests(nccl_output("all_gather", 4, 4, 648.0, latency_us=5.0, gpu="NVIDIA GB200"))
    fig = nccl_figures(run, nvl, "nvl72")[0]
    assert fig.constant == "intra_node" and fig.tier == "nvlink" and fig.sourced == pytest.approx(720.0)
    assert fig.factor == pytest.approx(0.90, rel=2e-3)


def test_gemm_pins_compute_against_the_sourced_mamf() -> None:
    """H100 SXM: 989 TFLOP/s x 0.80 MAMF [ST] = 791.2 BF16; FP8 1979 x 0.80 x (0.71 / 0.80) = 1405.1."""
    run = parse_gemm_bench(mamf_output([(4096, 4096, 8192, 712.1, 714.0, 726.3)]))
    fig = gemm_figures(run, DGX, "dgx-h100")[0]
    assert fig.constant == "compute" and fig.unit == "TFLOP/s" and fig.sourced == pytest.approx(791.2)
    assert fig.factor == pytest.approx(712.1 / 791.2) and fig.spread == 0.03
    fp8 = gemm_figures(parse_gemm_bench((GEMM / "mamf_h100_fp8.txt").read_text()), DGX, "dgx-h100")[0]
    assert fp8.sourced == pytest.approx(1979 * 0.71) and fp8.factor == pytest.approx(1402.6 / 1405.09, rel=1e-4)


@pytest.mark.parametrize(
    ("test", "field", "words"),
    [
        (PoolRun("dgx-h100", parse_gemm_bench(mamf_output([(1, 1, 1, 250.0, 251.0, 255.0)], device=A100))), "gemm",
         "ran on 'NVIDIA A100-SXM4-80GB'"),
        (PoolRun("dgx-h100", parse_gemm_bench(mamf_output([(1, 1, 1, 50.0, 51.0, 55.0)], dtype="float32"))), "gemm",
         "no matmul rate"),
        (_nccl("all_reduce", 8, 8, 300.0), "nccl_tests", "spans 8 hosts; pool 'dgx-h100' has 4 nodes"),
        (_nccl("all_reduce", 1, 8, 300.0, max_bytes=1 << 20), "nccl_tests", "below the bus bandwidth's plateau"),
        (_nccl("all_reduce", 1, 8, 300.0, gpu="NVIDIA L40S"), "nccl_tests", "wrong pool"),
        (PoolRun("a100", parse_gemm_bench(mamf_output([(1, 1, 1, 700.0, 701.0, 705.0)], device=H100))), "pool",
         "no pool 'a100'"),
    ],
)  # fmt: skip
def test_runs_that_cannot_be_read_against_the_pool(test: PoolRun, field: str, words: str) -> None:
    with pytest.raises(DomainError) as exc:
        figures_of(test, DGX)
    assert exc.value.field == field and words in exc.value.rule


def test_priors_from_the_newest_tests_and_the_fit_returns_them() -> None:
    tests = [  # newest first
        _nccl("all_reduce", 4, 8, 331.2),
        _nccl("all_gather", 1, 8, 396.0),  # NVLink factor 1.1: the multi-node run reads the NICs with it
        _nccl("all_gather", 1, 8, 180.0),  # older: replaced by the one above
        PoolRun("dgx-h100", parse_gemm_bench((GEMM / "mamf_h100_bf16.txt").read_text())),
        PoolRun("gone", parse_gemm_bench((GEMM / "mamf_h100_bf16.txt").read_text())),  # a pool no longer there
    ]
    ev = evaluate(tests, DGX)
    assert ev.newest == [True, True, False, True, False] and "no pool 'gone'" in ev.errors[4]
    p = ev.priors["dgx-h100"]
    assert p["intra_node"].value == pytest.approx(1.10, rel=2e-3) and "1 node x 8 GPUs" in p["intra_node"].source
    assert p["network"].value == pytest.approx(0.90, rel=2e-3) and p["network"].source.startswith("all_reduce_perf")
    assert p["compute"].value == pytest.approx(794.5 / 791.2) and 0.03 <= p["network"].spread < 0.04
    assert [f.constant for f in ev.table()["dgx-h100"]] == ["network", None, "intra_node", None, "compute"]

    report = fit_calibration([], ev.priors)
    cal = report.calibration.of("dgx-h100")
    assert (cal.intra_node, cal.network, cal.compute) == pytest.approx((1.10, 0.90, 794.5 / 791.2), rel=2e-3)
    sources = {c.name: c.prior_source for c in report.constants}
    assert sources["network"] == "all_reduce_perf, 4 nodes x 8 GPUs" and sources["compute"].startswith("mamf")


def test_two_tests_of_one_constant_combine() -> None:
    ev = evaluate([_nccl("all_gather", 1, 8, 324.0), _nccl("reduce_scatter", 1, 8, 360.0)], DGX)
    prior = ev.priors["dgx-h100"]["intra_node"]
    assert 0.9 < prior.value < 1.0 and prior.spread == pytest.approx(0.0527, abs=2e-3)  # their disagreement
    assert prior.source.count("_perf") == 2
