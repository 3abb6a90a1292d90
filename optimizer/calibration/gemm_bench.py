"""A cluster's GEMM acceptance test in its real output format: the Maximum Achievable Matmul FLOPS (MAMF) finder,
`compute/accelerator/benchmarks/mamf-finder.py` of stas00/ml-engineering [ST] (read at 744d01e, benchmark version 2,
the format since dacf05a, 2025-01-03).

What the script prints (its stdout is tee'd to `--output_file`, `\\r` and `\\033[K` turned into newlines):

- a header (`print_benchmark_header`): `Benchmark started on <date>`, `** Command line:`, `** Dtype: torch.<dtype>`,
  `** Platform/Device info:` with `- _CudaDeviceProperties(name='<GPU>', ...)`, `** Critical software versions:`
  with `- torch=<version>`, and `- benchmark version: 2`;
- `Warming up the accelerator for 30 secs ... accelerator warmup finished`;
- one line per shape: `f"{num_shapes:>6} | {mean:6.1f}(mean) {median:6.1f}(median) {max:6.1f}(max) @ {MxNxK:<20} |
  best: {mean:6.1f}(mean) {median:6.1f}(median) {max:6.1f}(max) TFLOPS"` (the first v2 commits printed max, median,
  mean in that order);
- the summary (`finish()`, also on Ctrl-C): `Tried {n} shapes => the best outcomes were:` (two spaces after `Tried`
  before b1bab88), then `mean:   {tflops:.1f} TFLOPS @ {M}x{N}x{K} (MxNxK)`, `median: ...`, `max:    ...`, the
  arithmetic and geometric means over every shape tried (or `geomean: ...` in early 2025), `Legend: ...` and
  `Elapsed time: ...`.

The MAMF is the best shape's mean over its timed iterations: the figure [ST]'s comparison table reports ("a mean of
100 iterations after 50 warmup iterations for each shape") and the one the GPU catalog's `mamf_fraction` comes from.
Only the parsing lives here (pure); comparing it with the cost model is optimizer/calibration/acceptance.py's job.
"""

from __future__ import annotations

import math
import re

from pydantic import BaseModel, ConfigDict, Field

from optimizer.errors import DomainError

FIELD = "gemm"
STATS = ("mean", "median", "max")

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_STARTED = re.compile(r"^Benchmark started on\s+\S+")
_DTYPE = re.compile(r"^\*\*\s*Dtype:\s*(?:torch\.)?(\w+)\s*$")
_DEVICE = re.compile(r"name='([^']+)'")
_TORCH = re.compile(r"^-?\s*torch=(\S+)\s*$")
_VERSION = re.compile(r"^-?\s*benchmark version:\s*(\d+)\s*$")
_SHAPE_START = re.compile(r"^\s*\d+\s+\|")
_SHAPE = re.compile(
    r"^\s*(\d+)\s+\|\s+(\S+)\((mean|median|max)\)(?:\s*/)?\s+(\S+)\((mean|median|max)\)(?:\s*/)?"
    r"(?:\s+(\S+)\((mean|median|max)\))?(?:\s+TFLOPS)?\s+@\s+(\d+)x(\d+)x(\d+)\s*\|"
)
_TRIED = re.compile(r"^Tried\s+(\d+)\s+shapes\s+=>\s+the best outcomes were:\s*$")
_BEST_START = re.compile(r"^(mean|median|max):")
_BEST = re.compile(r"^(mean|median|max):\s+(\S+)\s+TFLOPS\s+@\s+(\d+)x(\d+)x(\d+)\s+\(MxNxK\)\s*$")
_ARITHMETIC = re.compile(r"^arithmetic mean:\s+(\S+)\s+TFLOPS\s*$")
_GEOMETRIC = re.compile(r"^(?:geometric mean|geomean):\s+(\S+)\s+TFLOPS")
_VERSION_1 = re.compile(r"^The best outcome was\s")


class GemmBest(BaseModel):
    """The best shape for one statistic of the sweep."""

    model_config = ConfigDict(frozen=True)

    tflops: float = Field(gt=0, description="TFLOP/s (10^12 FLOP/s) of that statistic on that shape.")
    m: int = Field(ge=1, description="Rows of A and C.")
    n: int = Field(ge=1, description="Columns of B and C.")
    k: int = Field(ge=1, description="The reduction dimension.")

    @property
    def shape(self) -> str:
        return f"{self.m}x{self.n}x{self.k}"


class GemmBenchRun(BaseModel):
    """One mamf-finder run on one GPU: what it ran on and its best outcomes."""

    model_config = ConfigDict(frozen=True)

    dtype: str = Field(description="The torch dtype of the inputs (bfloat16, float16, float8_e4m3fn...).")
    device: str | None = Field(description="The GPU name torch reported (cudaDeviceProp.name), when printed.")
    torch_version: str | None = Field(default=None, description="torch.__version__ as printed.")
    benchmark_version: int | None = Field(default=None, description="The script's benchmark version (2).")
    shapes_tried: int = Field(ge=1, description="Shapes the summary says were tried.")
    shape_lines: int = Field(ge=0, description="Per-shape lines present in the output.")
    best_mean: GemmBest = Field(description="The best mean over a shape's iterations: the MAMF.")
    best_median: GemmBest
    best_max: GemmBest = Field(description="The best single iteration (the least time).")
    arithmetic_mean_tflops: float | None = Field(default=None, description="Mean over every shape tried, TFLOP/s.")
    geometric_mean_tflops: float | None = Field(default=None, description="Geometric mean over the shapes, TFLOP/s.")

    @property
    def mamf_tflops(self) -> float:
        """The maximum achievable matmul rate, TFLOP/s: the best shape's mean (as [ST]'s table reports it)."""
        return self.best_mean.tflops


def _tflops(text: str, line_no: int, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise DomainError(FIELD, f"line {line_no}: {what} {text!r} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise DomainError(FIELD, f"line {line_no}: {what} is {text}: a rate must be positive (no shape finished?)")
    return value


def _shape_means(line: str, n: int) -> float:
    """The mean TFLOP/s of one per-shape line (its labelled figures in any order)."""
    m = _SHAPE.match(line)
    if m is None:
        raise DomainError(
            FIELD,
            f"line {n}: not a mamf-finder shape line of '<n> | <mean>(mean) <median>(median) <max>(max) @ MxNxK | "
            f"best: ...': {line.strip()[:80]!r}",
        )
    g = m.groups()
    figures = {g[i + 1]: g[i] for i in (1, 3, 5) if g[i] is not None}
    if "mean" not in figures:
        raise DomainError(FIELD, f"line {n}: the shape line has no (mean) figure")
    return _tflops(figures["mean"], n, "the shape's mean")


def _check_run(
    header_line: int,
    tried_line: int,
    last: int,
    tried: int,
    dtype: str | None,
    best: dict[str, GemmBest],
    shape_means: list[float],
) -> str:
    """The run's dtype, once the parsed run is whole: a summary (else foreign text or a truncated run), its three
    best lines, the dtype header, no more shape lines than it tried, and a best mean that is the best of the shape
    lines."""
    if not tried_line:
        if not (header_line or dtype or shape_means):
            raise DomainError(
                FIELD, "not mamf-finder output: no 'Tried N shapes => the best outcomes were:' summary, no header"
            )
        raise DomainError(
            FIELD,
            f"line {last}: the output ends before mamf-finder's summary ('Tried N shapes => the best outcomes "
            "were:', printed when the sweep ends and on Ctrl-C): truncated?",
        )
    missing = [s for s in STATS if s not in best]
    if missing:
        raise DomainError(FIELD, f"line {tried_line}: the summary has no '{missing[0]}: ... TFLOPS @ MxNxK' line")
    if dtype is None:
        raise DomainError(
            FIELD, "no '** Dtype: torch.<dtype>' header line: the output must include mamf-finder's header"
        )
    if len(shape_means) > tried:
        raise DomainError(
            FIELD, f"line {tried_line}: {len(shape_means)} shape lines but the summary tried {tried} (two runs?)"
        )
    # The summary's best mean is the best of the per-shape means, printed to 0.1 TFLOP/s in both places.
    if shape_means and abs(max(shape_means) - best["mean"].tflops) > 0.051:
        raise DomainError(
            FIELD,
            f"line {tried_line}: the summary's best mean {best['mean'].tflops:.1f} TFLOPS is not the best of the "
            f"shape lines ({max(shape_means):.1f}): the output was edited or mixes runs",
        )
    return dtype


def parse_gemm_bench(text: str) -> GemmBenchRun:
    """Parse one mamf-finder output (its output file or its captured console). Truncated output (no summary),
    foreign text, an older benchmark version, two runs in one file or a malformed line are DomainErrors naming the
    line and the rule."""
    lines = [_ANSI.sub("", raw).rstrip() for raw in text.splitlines()]
    dtype = device = torch_version = None
    version: int | None = None
    header_line = tried_line = 0
    tried = 0
    best: dict[str, GemmBest] = {}
    shape_means: list[float] = []
    arithmetic = geometric = None
    last = 0
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        last = n
        stripped = line.strip()
        if _STARTED.match(stripped):
            if header_line:
                raise DomainError(FIELD, f"line {n}: a second run starts here (one mamf-finder run per file)")
            header_line = n
        elif m := _DTYPE.match(stripped):
            dtype = m.group(1)
        elif stripped.lstrip("- ").startswith("_") and (m := _DEVICE.search(stripped)):
            device = m.group(1)
        elif m := _TORCH.match(stripped):
            torch_version = m.group(1)
        elif m := _VERSION.match(stripped):
            version = int(m.group(1))
        elif _VERSION_1.match(stripped):
            raise DomainError(
                FIELD,
                f"line {n}: an older mamf-finder (benchmark version 1, before 2025-01) whose figures are not "
                "comparable (no cache flush between iterations): rerun the current mamf-finder.py",
            )
        elif m := _TRIED.match(stripped):
            if tried_line:
                raise DomainError(FIELD, f"line {n}: a second summary (one mamf-finder run per file)")
            tried_line, tried = n, int(m.group(1))
        elif _BEST_START.match(stripped) and tried_line:
            b = _BEST.match(stripped)
            if b is None:
                raise DomainError(
                    FIELD, f"line {n}: not a summary line of '<stat>: <TFLOPS> TFLOPS @ MxNxK (MxNxK)': {stripped!r}"
                )
            best[b.group(1)] = GemmBest(
                tflops=_tflops(b.group(2), n, f"the best {b.group(1)}"),
                m=int(b.group(3)),
                n=int(b.group(4)),
                k=int(b.group(5)),
            )
        elif (m := _ARITHMETIC.match(stripped)) and tried_line:
            arithmetic = _tflops(m.group(1), n, "the arithmetic mean")
        elif (m := _GEOMETRIC.match(stripped)) and tried_line:
            geometric = _tflops(m.group(1), n, "the geometric mean")
        elif _SHAPE_START.match(line) and "(m" in line:
            if tried_line:
                raise DomainError(FIELD, f"line {n}: a shape line after the summary (two runs in one file?)")
            shape_means.append(_shape_means(line, n))
    dtype = _check_run(header_line, tried_line, last, tried, dtype, best, shape_means)
    return GemmBenchRun(
        dtype=dtype,
        device=device,
        torch_version=torch_version,
        benchmark_version=version,
        shapes_tried=tried,
        shape_lines=len(shape_means),
        best_mean=best["mean"],
        best_median=best["median"],
        best_max=best["max"],
        arithmetic_mean_tflops=arithmetic,
        geometric_mean_tflops=geometric,
    )
