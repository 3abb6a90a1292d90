"""mamf-finder output written with the script's own print statements (stas00/ml-engineering 744d01e,
compute/accelerator/benchmarks/mamf-finder.py: print_benchmark_header, the per-shape line, finish()) through its Tee,
which turns \\r and \\033[K into newlines. The samples in gemm/ and the conversion tests' runs are written with it."""

from __future__ import annotations

import io
import math
import re

H100 = (
    "_CudaDeviceProperties(name='NVIDIA H100 80GB HBM3', major=9, minor=0, total_memory=81089MB, "
    "multi_processor_count=132, uuid=4dbfbb99-983a-79af-8527-ca9f0c139426, L2_cache_size=50MB)"
)
A100 = (
    "_CudaDeviceProperties(name='NVIDIA A100-SXM4-80GB', major=8, minor=0, total_memory=81050MB, "
    "multi_processor_count=108, uuid=1d6e3a51-5c4b-2a2f-0f3c-7b8e2f1d9c40, L2_cache_size=40MB)"
)
Shape = tuple[int, int, int, float, float, float]  # M, N, K, mean, median, max TFLOP/s


class _Tee:
    def __init__(self) -> None:
        self.buf = io.StringIO()

    def write(self, message: str) -> None:
        self.buf.write(re.sub(r"(\r|\033\[K)", "\n", message))

    def flush(self) -> None:
        pass


def mamf_output(
    shapes: list[Shape],
    dtype: str = "bfloat16",
    device: str = H100,
    torch_version: str = "2.7.0+cu126",
    argv: str = "./mamf-finder.py --m_range 0 4096 1024 --n 4096 --k 4096",
    date: str = "2025-11-03 09:14:27",
    range_info: str = "m=[0, 4096, 1024] | n=[4096] | k=[4096]",
    elapsed: str = "0:01:12",
    early_2025: bool = False,
) -> str:
    """The output file of one sweep over `shapes` (current format; `early_2025`: the January-October 2025 one)."""
    out = _Tee()

    def p(*args: object, end: str = "\n") -> None:
        print(*args, file=out, end=end)  # type: ignore[arg-type]

    dash = "" if early_2025 else "- "
    env = "" if early_2025 else "** Critical environment variables:\n- PYTORCH_TUNABLEOP_ENABLED=0\n\n"
    uname = "Linux node000 5.15.0-1063-nvidia #64-Ubuntu SMP Fri Aug 9 17:13:45 UTC 2024 x86_64"
    p(f"""
Benchmark started on {date}

** Command line:
/usr/bin/python {argv}

** Dtype: torch.{dtype}

** Platform/Device info:
{dash}{uname}
{dash}{device}

** Critical software versions:
{dash}torch={torch_version}
{dash}cuda=12.6

{env}** Additional notes:
{dash}benchmark version: 2


{"-" * 80}

""")
    p("Warming up the accelerator for 30 secs ... ", end="")
    p("accelerator warmup finished")
    best = {"max": 0.0, "median": 0.0, "mean": 0.0}
    config = {"max": "", "median": "", "mean": ""}
    for i, (m, n, k, mean, median, mx) in enumerate(shapes, start=1):
        cur = f"{m}x{n}x{k}"
        for stat, value in (("median", median), ("mean", mean), ("max", mx)):
            if value > best[stat]:
                best[stat], config[stat] = value, f"{cur} (MxNxK)"
        p(
            f"{i:>6} | {mean:6.1f}(mean) {median:6.1f}(median) {mx:6.1f}(max) @ {cur:<20} | best: "
            f"{best['mean']:6.1f}(mean) {best['median']:6.1f}(median) {best['max']:6.1f}(max) TFLOPS",
            end="\r",
        )
    means = [s[3] for s in shapes]
    geo = math.exp(sum(math.log(x) for x in means) / len(means))
    p("", end="\033[K")
    outcomes = f"""mean:   {best["mean"]:.1f} TFLOPS @ {config["mean"]}
median: {best["median"]:.1f} TFLOPS @ {config["median"]}
max:    {best["max"]:.1f} TFLOPS @ {config["max"]}"""
    if early_2025:
        p(f"""
Tried  {len(shapes)} shapes => the best outcomes were:
{outcomes}

geomean: {geo:.1f} TFLOPS for {len(shapes)} shapes in range: {range_info}
""")
    else:
        p(f"""
Tried {len(shapes)} shapes => the best outcomes were:
{outcomes}

Across {len(shapes)} shapes in range: {range_info} in this run:
arithmetic mean: {sum(means) / len(means):.1f} TFLOPS
geometric mean:  {geo:.1f} TFLOPS
""")
    p("Legend: TFLOPS = 10**12 FLOPS")
    p(f"Elapsed time: {elapsed}")
    return out.buf.getvalue()


def grid(ms: tuple[int, ...], ns: tuple[int, ...], ks: tuple[int, ...], best: Shape, base: float) -> list[Shape]:
    """A sweep whose best shape is `best` and whose others run a few percent below `base`."""
    rows: list[Shape] = []
    for m in ms:
        for n in ns:
            for k in ks:
                if (m, n, k) == best[:3]:
                    rows.append(best)
                    continue
                mean = round(base - (m * 7 + n * 3 + k) % 23 - 0.004 * (16384 - k), 1)
                rows.append((m, n, k, mean, round(mean * 1.004, 1), round(mean * 1.021, 1)))
    return rows
