"""The phases beside the step time (optimizer/calibration/run_log_phases.py), read from log text in each framework's
own printed format (a few lines each; the format strings are cited in the module):
- Megatron-LM core_v0.19.0 megatron/core/timers.py: '(min, max) time across ranks (ms):' then
  '    {}: ({:.2f}, {:.2f})'.format((name + ' ').ljust(48, '.'), min, max); `max` and `all` log options;
  the timer names of megatron/training/training.py training_log (`--timing-log-level 2`).
- DeepSpeed edaa722 deepspeed/utils/timer.py SynchronizedWallClockTimer.log: 'time (ms) | fwd: 12.34 | ...',
  printed by print_dist as '[Rank 0] ...'.
- torchtitan torchtitan/components/metrics.py: the metrics dict's "time_metrics/end_to_end(s)",
  "time_metrics/data_loading(s)" (as a JSON-lines dump writes it).
The figures are this test's own.
"""

from __future__ import annotations

import pytest

from optimizer.calibration.run_log_phases import deepspeed_phases, megatron_phases, torchtitan_phases
from optimizer.calibration.run_logs import parse_log
from optimizer.spec.workload import TrainingWorkload


def _iteration(n: int, ms: float) -> str:
    return (
        f" [2026-08-20 10:00:{n:02d}] iteration {n:8d}/     100 | consumed samples:          {128 * n} | "
        f"elapsed time per iteration (ms): {ms} | learning rate: 2.000000E-07 | global batch size:   128 | "
        "lm loss: 1.052811E+01 | loss scale: 1.0 | grad norm: 12.811 | number of skipped iterations:   0 |"
    )


MINMAX = """(min, max) time across ranks (ms):
    forward-backward ...............................: (5101.22, 5120.40)
    all-grads-sync .................................: (180.31, 212.77)
    params-all-gather ..............................: (95.10, 101.42)
    optimizer ......................................: (40.05, 41.90)
    forward-compute ................................: (1602.12, 1688.03)
    backward-compute ...............................: (3301.50, 3390.11)"""
WARM = """(min, max) time across ranks (ms):
    forward-backward ...............................: (9101.22, 9120.40)
    optimizer ......................................: (940.05, 941.90)"""


def megatron_log() -> str:
    lines = [_iteration(1, 48211.0), WARM]
    for n, ms in ((2, 5302.4), (3, 5390.2), (4, 5361.6)):
        lines += [_iteration(n, ms), MINMAX]
    lines.append("[after training is done] datetime: 2026-08-20 10:10:00")
    return "\n".join(lines) + "\n"


def test_megatron_timers_minmax_after_warmup_the_slowest_rank() -> None:
    phases = megatron_phases(megatron_log(), warmup=1)
    assert phases == pytest.approx(
        {
            "forward-backward": 5.12040,
            "all-grads-sync": 0.21277,
            "params-all-gather": 0.10142,
            "optimizer": 0.04190,
            "forward-compute": 1.68803,
            "backward-compute": 3.39011,
        }
    )
    parsed = parse_log(megatron_log(), warmup=1)
    assert parsed.measurement.step_time_s == pytest.approx(5.3616)  # median of 5302.4 5390.2 5361.6 ms
    assert parsed.measurement.phases_s == phases
    # without warm-up the first interval's slow optimizer enters the median (of 941.90, 41.90, 41.90, 41.90)
    assert megatron_phases(megatron_log(), warmup=0)["optimizer"] == pytest.approx(0.0419)
    assert megatron_phases(megatron_log(), warmup=0)["forward-backward"] == pytest.approx(5.1204)


def test_megatron_max_and_all_options() -> None:
    max_only = "\n".join(
        [
            _iteration(4, 5361.6),
            "max time across ranks (ms):",
            "    forward-backward ...............................: 5130.00",
            "    optimizer ......................................: 42.00",
        ]
    )
    assert megatron_phases(max_only, warmup=0) == pytest.approx({"forward-backward": 5.13, "optimizer": 0.042})
    every_rank = "\n".join(
        [
            _iteration(4, 5361.6),
            "times across ranks (ms):",
            "  forward-backward:",
            "     rank  0: 5101.22",
            "     rank  1: 5120.40",
            "  optimizer:",
            "     rank  0: 40.05",
            "     rank  1: 41.90",
            "[after training is done]",
        ]
    )
    assert megatron_phases(every_rank, warmup=0) == pytest.approx({"forward-backward": 5.1204, "optimizer": 0.0419})


DEEPSPEED = """[Rank 0] time (ms) | fwd_microstep: 101.20 | bwd_microstep: 230.55 | bwd_inner_microstep: 200.12 | \
bwd_allreduce_microstep: 30.01 | step_microstep: 11.40
[Rank 0] time (ms) | fwd: 812.30 | bwd: 1850.10 | bwd_inner: 1601.00 | bwd_allreduce: 249.10 | step: 95.20
[2024-05-02 10:11:02,114] [INFO] [timer.py:260:stop] epoch=0/micro_step=8/global_step=1, RunningAvgSamplesPerSec=\
30.91, CurrSamplesPerSec=29.77, MemAllocated=18.2GB, MaxMemAllocated=31.05GB
[Rank 0] time (ms) | fwd: 810.00 | bwd: 1848.00 | bwd_inner: 1600.00 | bwd_allreduce: 248.00 | step: 94.00
[2024-05-02 10:11:19,302] [INFO] [timer.py:260:stop] epoch=0/micro_step=16/global_step=2, RunningAvgSamplesPerSec=\
31.10, CurrSamplesPerSec=31.52, MemAllocated=18.2GB, MaxMemAllocated=31.05GB
[Rank 0] time (ms) | fwd: 811.00 | bwd: 1852.00 | bwd_inner: 1602.00 | bwd_allreduce: 250.00 | step: 96.00
[2024-05-02 10:11:36,388] [INFO] [timer.py:260:stop] epoch=0/micro_step=24/global_step=3, RunningAvgSamplesPerSec=\
31.22, CurrSamplesPerSec=31.44, MemAllocated=18.2GB, MaxMemAllocated=31.05GB
"""


def test_deepspeed_wall_clock_breakdown_global_timers() -> None:
    phases = deepspeed_phases(DEEPSPEED, warmup=1)
    assert phases == pytest.approx(
        {"fwd": 0.8105, "bwd": 1.850, "bwd_inner": 1.601, "bwd_allreduce": 0.249, "step": 0.095}
    )
    parsed = parse_log(DEEPSPEED, workload=TrainingWorkload(global_batch_size=256, seq_len=2048), warmup=1)
    assert parsed.format == "deepspeed" and parsed.measurement.phases_s == phases


def test_torchtitan_time_metrics_and_logs_without_phases() -> None:
    lines = [
        f'{{"step": {s}, "time_metrics/end_to_end(s)": {e}, "time_metrics/data_loading(s)": {d}}}'
        for s, e, d in ((10, 9.1, 0.20), (20, 2.81, 0.011), (30, 2.83, 0.012), (40, 2.79, 0.010))
    ]
    assert torchtitan_phases("\n".join(lines), warmup=1) == pytest.approx({"end_to_end": 2.81, "data_loading": 0.011})
    plain = "\n".join(_iteration(n, 5000.0 + n) for n in range(1, 6))
    assert megatron_phases(plain, warmup=1) == {}
    assert parse_log(plain, warmup=1).measurement.phases_s is None
