"""nccl-tests output written with nccl-tests' own formats (NVIDIA/nccl-tests a0b82b2, NCCL_TESTS_VERSION 2.19.6):
`writeDeviceReport`, `writeResultHeader`, `writeBenchmarkLinePreamble` / `Body` (`getFloatStr` widths), and
`writeResultFooter` in src/util.cu; sizes and bandwidths as src/common.cu and the collectives' GetBw compute them.
The conversion tests write runs at a known plateau bus bandwidth with it."""

from __future__ import annotations

# busbw = algbw x this, per collective (src/<collective>.cu *GetBw).
BUS_FACTOR = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
    "sendrecv": lambda n: 1.0,
}
REDOP = {"all_reduce": "sum", "reduce_scatter": "sum"}
GPU = "NVIDIA H100 80GB HBM3"


def _float(value: float, width: int) -> str:
    """getFloatStr: as many decimals (2, 1, 0) as fit the width, else an exponent."""
    for fmt in (f"%{width}.2f", f"%{width}.1f", f"%{width}.0f"):
        s = fmt % value
        if len(s) <= width:
            return s
    return (f"%{width}.1e" if width >= 7 else f"%{width}.0e") % value


def nccl_output(
    collective: str,
    hosts: int,
    per_host: int,
    busbw_gbs: float,
    latency_us: float = 20.0,
    max_bytes: int = 8 << 30,
    gpu: str = GPU,
) -> str:
    """One run's output: `hosts` x `per_host` ranks whose bus bandwidth approaches `busbw_gbs` for large messages
    (time = latency + bytes / peak algorithm bandwidth)."""
    n = hosts * per_host
    factor = BUS_FACTOR[collective](n)
    peak_algbw = busbw_gbs / factor * 1e9
    lines = [
        "# nccl-tests version 2.19.6 nccl-headers=22703 nccl-library=22703",
        f"# Collective test starting: {collective}_perf",
        f"# nThread 1 nGpus 1 minBytes 8 maxBytes {max_bytes} step: 2(factor) warmup iters: 5 iters: 20 "
        "agg iters: 1 validation: 1 graph: 0 unalign: 0",
        "#",
        "# Using devices",
    ]
    for r in range(n):
        host, dev = divmod(r, per_host)
        lines.append(
            f"#  Rank {r:2d} Group  0 Pid {4000 + r:6d} on {f'node{host:03d}':>10s} device {dev:2d} "
            f"[{0:04x}:{0x18 + dev:02x}:{0:02x}] {gpu}"
        )
    widths = (10, 12, 8, 6, 6, 7, 6, 6, 6, 7, 6, 6, 6)  # writeResultHeader's %10s  %12s  %8s ...

    def header(*cols: str) -> str:
        return "# " + "  ".join(f"{c:>{w}}" for c, w in zip(cols, widths, strict=True)) + " "

    lines += [
        "#",
        "# " + "  ".join(" " * w for w in widths[:5]) + " " * 11 + "out-of-place" + " " * 23 + "in-place" + " " * 10,
        header("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
               "#wrong"),
        header("(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", ""),
    ]  # fmt: skip
    size, busbws = 8, []
    while size <= max_bytes:
        body = []
        for slower in (1.0, 1.004):  # in-place a little slower, as in the tests' own runs
            t_s = (latency_us * 1e-6 + size / peak_algbw) * slower
            algbw = size / t_s / 1e9
            busbw = algbw * factor
            busbws.append(busbw)
            body.append(f"  {_float(t_s * 1e6, 7)}  {_float(algbw, 6)}  {_float(busbw, 6)}  {0:6g}")
        lines.append(
            f"{size:12d}  {size // 4:12d}  {'float':>8s}  {REDOP.get(collective, 'none'):>6s}  {-1:6d}" + "".join(body)
        )
        size *= 2
    lines += [
        "# Out of bounds values : 0 OK",
        f"# Avg bus bandwidth    : {sum(busbws) / len(busbws):g} ",
        "#",
        f"# Collective test concluded: {collective}_perf",
        "",
    ]
    return "\n".join(lines)
