"""nccl-tests output read in its own format (src/util.cu's printf formats, a0b82b2): ranks, hosts, GPU, the
table, the plateau bus bandwidth and the small-message latency; truncated, foreign or failed output refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from optimizer.calibration.nccl_tests import parse_nccl_tests
from optimizer.errors import DomainError

NCCL = Path(__file__).parent / "nccl"
SINGLE = (NCCL / "all_reduce_8xH100.txt").read_text()
MULTI = (NCCL / "all_gather_2x8xH100_old.txt").read_text()


def test_single_node_all_reduce() -> None:
    run = parse_nccl_tests(SINGLE)
    assert run.collective == "all_reduce" and run.ranks == 8 and run.hosts == ("node000",)
    assert run.gpu == "NVIDIA H100 80GB HBM3" and not run.multi_node
    assert len(run.rows) == 11 and run.rows[0].size_bytes == 8 and run.rows[-1].size_bytes == 8589934592
    assert run.rows[-1].busbw_gbs == 479.82 and run.rows[-1].in_place_busbw_gbs == 475.07
    assert run.peak_busbw_gbs() == pytest.approx(478.53)  # median of the three largest messages
    assert run.latency_us() == 12.0 and run.avg_busbw_gbs == 200.5


def test_multi_node_all_gather_from_an_older_version_needs_its_name() -> None:
    with pytest.raises(DomainError) as exc:
        parse_nccl_tests(MULTI)
    assert exc.value.field == "nccl_tests" and "does not name its collective" in exc.value.rule
    run = parse_nccl_tests(MULTI, "all_gather")
    assert run.multi_node and run.hosts == ("node000", "node001") and run.ranks == 16
    assert 39 < run.peak_busbw_gbs() < 40 and run.rows[0].redop == "none"
    with pytest.raises(DomainError, match="all_reduce_perf, not all_gather"):
        parse_nccl_tests(SINGLE, "all_gather")


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("hello\nworld\n", "not nccl-tests output"),
        (SINGLE.split("           8")[0], "no result rows"),  # cut after the header
        (SINGLE.replace("   12.00    0.00    0.00", "   12.00    x.yz    0.00", 1), "algbw 'x.yz' is not a number"),
        (SINGLE.replace("  1073741824     268435456", "  1073741824", 1), "line 25: not a result row"),
        (SINGLE.replace("Out of bounds values : 0 OK", "Out of bounds values : 3 FAILED"), "out-of-bounds"),
    ],
)
def test_bad_output_names_the_line_and_the_rule(text: str, words: str) -> None:
    with pytest.raises(DomainError) as exc:
        parse_nccl_tests(text)
    assert exc.value.field == "nccl_tests" and words in exc.value.rule


def test_output_cut_before_its_footer_is_truncated() -> None:
    """A run killed mid-table has rows but no '# Avg bus bandwidth' footer: its plateau would be a smaller message's."""
    cut = SINGLE.split("  1073741824")[0]
    with pytest.raises(DomainError) as exc:
        parse_nccl_tests(cut)
    assert exc.value.field == "nccl_tests" and "without the '# Avg bus bandwidth' footer" in exc.value.rule
    assert exc.value.rule.startswith(f"line {len(cut.splitlines())}:")
