"""A run's restart history (issue 46 §2): sacct records into interruptions per running day with their 80% band,
restart gaps and uptime, and the pool's reliability narrowed by them."""

from __future__ import annotations

import pytest

from optimizer.calibration.restart_history import log_applied_to, parse_sacct, parse_training_log
from optimizer.errors import DomainError
from optimizer.spec.reliability import DEFAULT_SPREAD, PoolReliability

SACCT = """JobID|JobName|State|Start|End|NNodes
1001|pretrain|NODE_FAIL|2024-05-01T00:00:00|2024-05-01T20:00:00|32
1001.0|python|FAILED|2024-05-01T00:00:10|2024-05-01T20:00:00|32
1002|pretrain|FAILED|2024-05-01T20:30:00|2024-05-03T08:00:00|32
1003|pretrain|TIMEOUT|2024-05-03T08:10:00|2024-05-04T08:10:00|32
1004|pretrain|CANCELLED by 123|2024-05-04T09:00:00|2024-05-05T12:00:00|32
1005|pretrain|COMPLETED|2024-05-05T12:20:00|2024-05-07T00:00:00|32
1006|pretrain|PENDING|Unknown|Unknown|32
"""


def test_sacct_records_measure_interruptions_restarts_and_uptime() -> None:
    h = parse_sacct(SACCT)
    assert (h.jobs, h.interruptions, h.nodes) == (5, 4, 32)  # the step and the pending job left out
    assert h.restart_gaps_s == (1800.0, 600.0, 3000.0, 1200.0)
    running = 20 + 35.5 + 24 + 27 + 35.6666667  # hours
    assert h.running_s == pytest.approx(running * 3600)
    assert h.per_running_day == pytest.approx(4 / (running / 24))
    assert h.uptime == pytest.approx(running / (6 * 24))
    lo, hi = h.rate_band()
    assert lo < h.per_running_day < hi
    # Poisson 80% interval for 4 events: chi2(0.1; 8)/2 = 1.74 and chi2(0.9; 10)/2 = 7.99 events (tables)
    days = running / 24
    assert lo * days == pytest.approx(1.74, abs=0.05) and hi * days == pytest.approx(7.99, abs=0.1)


def test_a_history_sets_the_rate_and_narrows_its_range() -> None:
    h = parse_sacct(SACCT)
    rel = h.applied_to(PoolReliability())
    assert rel.failures_per_1000_node_days == pytest.approx(1000 * h.per_running_day / 32)
    assert rel.launch_s == pytest.approx(1650.0)
    lo, hi = rel.spread_of("failure_rate")
    assert lo < 1 < hi and hi / lo < DEFAULT_SPREAD["failure_rate"][1] / DEFAULT_SPREAD["failure_rate"][0]
    # A longer history narrows it further: 40 interruptions over ten times the running time.
    lines = SACCT.splitlines()
    many = [lines[0]]
    for k in range(10):
        for ln in lines[1:6]:
            if ".0|" in ln:
                continue
            cells = ln.split("|")
            for i in (3, 4):
                cells[i] = cells[i].replace("2024-05", f"2024-{k + 1:02d}")
            many.append("|".join(cells))
    long = parse_sacct("\n".join(many)).applied_to(PoolReliability())
    llo, lhi = long.spread_of("failure_rate")
    assert lhi / llo < hi / lo


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("", "restart_history"),
        ("JobID|State|Start\n1|FAILED|2024-05-01T00:00:00\n", "restart_history"),
        ("JobID|State|Start|End\n1|FAILED|yesterday|2024-05-01T00:00:00\n", "restart_history line 2 Start"),
        ("JobID|State|Start|End\n1|FAILED|2024-05-02T00:00:00|2024-05-01T00:00:00\n", "restart_history line 2"),
    ],
)
def test_bad_history_names_the_field(text: str, field: str) -> None:
    with pytest.raises(DomainError) as e:
        parse_sacct(text)
    assert e.value.field == field


def _megatron_log() -> str:
    """Three jobs of one run, as Megatron-LM logs them: 10 s steps logged every 10 iterations; the first job dies
    after iteration 300 (12:50) and the next resumes from the checkpoint at 250, first logging 260 at 13:30; the
    second dies after 500 and the third resumes from 480."""
    lines = []
    t = 12 * 3600.0

    def at(s: float) -> str:
        return f"2024-05-01 {int(s // 3600):02d}:{int(s % 3600 // 60):02d}:{int(s % 60):02d}"

    def job(first: int, last: int, start: float) -> float:
        s = start
        for i in range(first, last + 1, 10):
            lines.append(
                f" [{at(s)}] iteration {i:8d}/{10000:8d} | consumed samples: {i * 64:12d} | "
                f"elapsed time per iteration (ms): 10000.0 | learning rate: 1.0E-04 |"
            )
            s += 100.0
        return s - 100.0

    end = job(10, 300, t)  # 12:00 to 12:48:20
    end = job(260, 500, end + 2500.0)
    job(490, 700, end + 1800.0)
    lines.insert(5, "some other line the parser skips")
    return "\n".join(lines)


def test_a_training_log_measures_restarts_downtime_rework_and_goodput() -> None:
    h = parse_training_log(_megatron_log())
    assert h.restarts == 2 and h.rework_steps == (40, 10) and h.downtime_s == (2500.0, 1800.0)
    assert h.step_s == 10.0 and h.steps_advanced == 690
    assert h.span_s == pytest.approx((29 + 24 + 21) * 100.0 + 2500.0 + 1800.0)
    assert h.measured_goodput == pytest.approx(690 * 10.0 / h.span_s)
    rel = log_applied_to(h, PoolReliability(), nodes=4)
    assert rel.failures_per_1000_node_days == pytest.approx(1000 * h.per_running_day / 4)
    assert rel.launch_s < 2150.0 and rel.spread_of("launch_s")[0] < 1 < rel.spread_of("launch_s")[1]
    with pytest.raises(DomainError, match="two Megatron-LM iteration lines"):
        parse_training_log("nothing to see")
