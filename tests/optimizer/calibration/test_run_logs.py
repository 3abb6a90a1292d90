"""Log parsers read the lines each framework prints, skip warm-up and take the median (fixtures in logs/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from optimizer.calibration.run_logs import detect_format, parse_log
from optimizer.errors import DomainError
from optimizer.spec.workload import TrainingWorkload

LOGS = Path(__file__).parent / "logs"


def read(name: str) -> str:
    return (LOGS / name).read_text()


def test_megatron_iterations_after_warmup_and_memory_report() -> None:
    p = parse_log(read("megatron.log"))
    assert p.format == "megatron" and p.steps_found == 7 and p.steps_used == 4
    # iterations 4..7: 5361.6, 5470.7, 5829.9, 5402.3 ms -> median 5436.5 ms
    assert p.measurement.step_time_s == pytest.approx(5.4365)
    # the larger rank's max allocated, MiB -> GB
    assert p.measurement.peak_allocated_gb == pytest.approx(63002.75 * 2**20 / 1e9)
    assert p.measurement.peak_reserved_gb == pytest.approx(68352.0 * 2**20 / 1e9)


def test_torchtitan_tps_is_per_gpu() -> None:
    w = TrainingWorkload(global_batch_size=64, seq_len=8192)
    p = parse_log(read("torchtitan.log"), workload=w, gpus=64)
    assert p.format == "torchtitan" and p.steps_used == 4
    tps = 5_862.0  # median of 5,856 5,593 5,868 5,869 (steps 30..60)
    assert p.measurement.tokens_per_s == pytest.approx(tps * 64)
    assert p.measurement.step_time_s == pytest.approx(64 * 8192 / (tps * 64))
    assert p.measurement.peak_reserved_gb == pytest.approx(49.66 * 2**30 / 1e9)
    with pytest.raises(DomainError, match="GPU count"):
        parse_log(read("torchtitan.log"), workload=w)


def test_deepspeed_samples_per_second_of_the_global_batch() -> None:
    w = TrainingWorkload(global_batch_size=512, seq_len=2048)
    p = parse_log(read("deepspeed.log"), workload=w, warmup=1)
    assert p.format == "deepspeed" and p.steps_used == 4
    assert p.measurement.step_time_s == pytest.approx((512 / 31.52 + 512 / 31.44) / 2)  # median step time
    assert p.measurement.peak_allocated_gb == pytest.approx(31.07 * 2**30 / 1e9)
    assert p.measurement.peak_reserved_gb == pytest.approx(34 * 2**30 / 1e9)


def test_nemo_and_serving() -> None:
    nemo = parse_log(read("nemo.log"))
    assert nemo.format == "nemo" and nemo.measurement.step_time_s == pytest.approx(4.09)  # steps 4-6: 4.09 4.10 4.08
    serve = parse_log(read("vllm.log"))
    assert serve.format == "vllm"
    assert serve.measurement.ttft_s == pytest.approx(9.4507)
    assert serve.measurement.tpot_s == pytest.approx(0.0488)
    assert serve.measurement.tokens_per_s == pytest.approx(6508.6)


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("nothing to see here\n", "no known step"),
        (" iteration        1/     100 | elapsed time per iteration (ms): 1000.0 |\n", "warm-up"),
    ],
)
def test_logs_without_usable_lines_name_the_rule(text: str, rule: str) -> None:
    with pytest.raises(DomainError, match=rule) as exc:
        parse_log(text)
    assert exc.value.field == "log"


def test_detection_and_explicit_format_mismatch() -> None:
    assert detect_format(read("torchtitan.log")) == "torchtitan"
    with pytest.raises(DomainError, match="megatron"):
        parse_log(read("vllm.log"), "megatron")
