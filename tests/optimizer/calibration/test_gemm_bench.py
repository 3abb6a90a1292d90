"""mamf-finder output read in its own format (stas00/ml-engineering compute/accelerator/benchmarks/mamf-finder.py,
benchmark version 2): dtype, device, the best mean / median / max with their shapes; truncated, foreign, older,
mixed or malformed output refused naming the line."""

from __future__ import annotations

from pathlib import Path

import pytest

from optimizer.calibration.gemm_bench import parse_gemm_bench
from optimizer.errors import DomainError

GEMM = Path(__file__).parent / "gemm"
H100 = (GEMM / "mamf_h100_bf16.txt").read_text()
FP8 = (GEMM / "mamf_h100_fp8.txt").read_text()
A100_EARLY_2025 = (GEMM / "mamf_a100_bf16_2025-02.txt").read_text()


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), start=1) if needle in line)


def test_current_output_file() -> None:
    run = parse_gemm_bench(H100)
    assert run.dtype == "bfloat16" and run.device == "NVIDIA H100 80GB HBM3" and run.torch_version == "2.7.0+cu126"
    assert run.benchmark_version == 2 and run.shapes_tried == 12 and run.shape_lines == 12
    assert run.mamf_tflops == 794.5 and run.best_mean.shape == "2048x2048x13312"
    assert run.best_median.tflops == 797.7 and run.best_max.tflops == 811.2
    assert run.arithmetic_mean_tflops == 756.2 and run.geometric_mean_tflops == 756.0


def test_fp8_and_the_early_2025_summary() -> None:
    fp8 = parse_gemm_bench(FP8)
    assert fp8.dtype == "float8_e4m3fn" and fp8.mamf_tflops == 1402.6 and fp8.best_mean.shape == "1024x9216x14336"
    old = parse_gemm_bench(A100_EARLY_2025)  # 'Tried  N', 'geomean:', header lines without '- '
    assert old.device == "NVIDIA A100-SXM4-80GB" and old.torch_version == "2.6.0+cu126"
    assert old.mamf_tflops == 271.2 and old.geometric_mean_tflops == 216.9 and old.arithmetic_mean_tflops is None


def test_console_capture_with_carriage_returns_and_an_interrupt() -> None:
    """The console shows every shape line ending in \\r and the summary after \\033[K (Ctrl-C prints it too)."""
    body, summary = H100.split("\n\n\nTried")
    console = body.replace(" TFLOPS\n", " TFLOPS\r") + "\x1b[K\n^C\nTried" + summary
    run = parse_gemm_bench(console)
    assert run.mamf_tflops == 794.5 and run.shape_lines == 12


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("hello\nworld\n", "not mamf-finder output"),
        (FP8.split("\nTried")[0], "ends before mamf-finder's summary"),
        (H100.replace("mean:   794.5", "mean:   x94.5"), "the best mean 'x94.5' is not a number"),
        (H100.replace("mean:   794.5 TFLOPS", "mean:   0.0 TFLOPS"), "must be positive"),
        (H100.replace("median: 797.7 TFLOPS @ 2048x2048x13312 (MxNxK)", "median: 797.7 TFLOPS"), "not a summary line"),
        (H100.replace("max:    811.2", "most:   811.2"), "no 'max: ... TFLOPS @ MxNxK' line"),
        (H100.replace("     6 |  794.5(mean)", "     6 |  794.5(mea)"), "not a mamf-finder shape line"),
        (H100.replace("** Dtype: torch.bfloat16\n", ""), "no '** Dtype"),
        (H100 + H100, "a second run starts here"),
        (H100.replace("794.5(mean)  797.7", "790.5(mean)  797.7"), "not the best of the shape lines"),
        (
            "Benchmark started on 2024-12-23 10:00:00\n** Dtype: torch.bfloat16\n"
            "The best outcome was 801.2(max)/790.1(median) TFLOPS @ 4096x4096x4096 (tried 3 shapes)\n",
            "benchmark version 1",
        ),
    ],
)
def test_bad_output_names_the_line_and_the_rule(text: str, words: str) -> None:
    with pytest.raises(DomainError) as exc:
        parse_gemm_bench(text)
    assert exc.value.field == "gemm" and words in exc.value.rule


def test_errors_name_the_offending_line() -> None:
    broken = H100.replace("     6 |  794.5(mean)", "     6 |  794.5(mea)")
    with pytest.raises(DomainError, match=f"line {_line_of(H100, '     6 |')}:"):
        parse_gemm_bench(broken)
    truncated = H100.split("\n\n\nTried")[0]
    with pytest.raises(DomainError, match=f"line {len(truncated.splitlines())}: the output ends"):
        parse_gemm_bench(truncated)
