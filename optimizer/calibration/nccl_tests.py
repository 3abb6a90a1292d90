"""A cluster's acceptance tests in their real output format: NVIDIA nccl-tests (`all_reduce_perf`,
`all_gather_perf`, `reduce_scatter_perf`, `alltoall_perf`, `sendrecv_perf`), single node or multi node [issue 33].

The format is what nccl-tests prints (NVIDIA/nccl-tests a0b82b2, NCCL_TESTS_VERSION 2.19.6, src/util.cu):
`#  Rank %2d Group %2d Pid %6d on %10s device %2d [pci] <GPU name>` per rank, then the table whose rows are
`%12li %12li %8s %6s %6s` (size B, count, type, redop, root) followed by time (us), algbw and busbw (GB/s) and
#wrong, out-of-place then in-place (`writeBenchmarkLinePreamble`, `writeBenchmarkLineBody`), and the footer
`# Avg bus bandwidth : %g` and, in newer versions, `# Collective test concluded: <program>`. Bus bandwidth is the
algorithm bandwidth times 2(n-1)/n for all-reduce, (n-1)/n for all-gather, reduce-scatter and all-to-all, 1 for
send/recv (src/all_reduce.cu AllReduceGetBw and its siblings): it is comparable with a link's rate, which is what the
cost model's NVLink / NIC efficiencies are fractions of.

Only the parsing lives here (pure); pinning a pool's bandwidths from it is the calibration's job.
"""

from __future__ import annotations

import re
import statistics
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from optimizer.errors import DomainError

Collective = Literal["all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv"]
COLLECTIVES: tuple[Collective, ...] = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv")
FIELD = "nccl_tests"

# The plateau: the bus bandwidth of the largest messages (NCCL reaches its peak from ~64 MiB on H100 NVLink and
# 400G InfiniBand; nccl-tests' own PERFORMANCE.md reads busbw at the large sizes). The latency: the time of the
# smallest messages, where the protocol's per-hop cost dominates [formulas C1].
PLATEAU_ROWS = 3
LATENCY_MAX_BYTES = 1024

_RANK = re.compile(
    r"^#\s+Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device\s+(\d+)\s+\[[^\]]*\]\s+(.+?)\s*$"
)
_ROW = re.compile(
    r"^\s*(\d+)\s+(\d+)\s+(\S+)\s+(\S+)\s+(-?\d+)"  # size, count, type, redop, root
    r"\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)"  # out-of-place: time, algbw, busbw, #wrong
    r"(?:\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+))?"  # in-place (absent in trace replay)
)
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*([0-9.eE+-]+)")
_CONCLUDED = re.compile(r"^#\s*Collective test concluded:\s*(\S+)")
_OUT_OF_BOUNDS = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)")


class NcclRow(BaseModel):
    """One message size of the table (out-of-place, and in-place where printed)."""

    model_config = ConfigDict(frozen=True)

    size_bytes: int = Field(description="Bytes per rank's buffer (nccl-tests' size column).")
    count: int = Field(description="Elements.")
    dtype: str
    redop: str
    time_us: float = Field(description="Out-of-place time, microseconds.")
    algbw_gbs: float = Field(description="Out-of-place algorithm bandwidth, GB/s.")
    busbw_gbs: float = Field(description="Out-of-place bus bandwidth, GB/s.")
    in_place_busbw_gbs: float | None = Field(default=None, description="In-place bus bandwidth, GB/s.")


class NcclTestRun(BaseModel):
    """One nccl-tests run: what it ran on and its table."""

    model_config = ConfigDict(frozen=True)

    collective: Collective
    ranks: int = Field(description="Ranks (GPUs) in the run.")
    hosts: tuple[str, ...] = Field(description="Host names, in rank order of first appearance.")
    gpu: str | None = Field(description="The GPU name nccl-tests printed (cudaDeviceProp.name).")
    rows: tuple[NcclRow, ...]
    avg_busbw_gbs: float | None = Field(description="The footer's average bus bandwidth, GB/s.")

    @property
    def multi_node(self) -> bool:
        """Whether the run crossed the network (ranks on more than one host)."""
        return len(self.hosts) > 1

    def peak_busbw_gbs(self) -> float:
        """The plateau: median bus bandwidth of the PLATEAU_ROWS largest messages, GB/s."""
        largest = sorted(self.rows, key=lambda r: r.size_bytes)[-PLATEAU_ROWS:]
        return float(statistics.median(r.busbw_gbs for r in largest))

    def latency_us(self) -> float | None:
        """The small-message time: the least out-of-place time at or below LATENCY_MAX_BYTES, microseconds."""
        small = [r.time_us for r in self.rows if 0 < r.size_bytes <= LATENCY_MAX_BYTES]
        return min(small) if small else None


def _number(text: str, line_no: int, what: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise DomainError(FIELD, f"line {line_no}: {what} {text!r} is not a number") from None


def _collective_of(program: str) -> Collective | None:
    name = program.rsplit("/", 1)[-1].removesuffix("_mpi").removesuffix("_perf")
    return next((c for c in COLLECTIVES if c == name), None)


def parse_nccl_tests(text: str, collective: Collective | None = None) -> NcclTestRun:
    """Parse one nccl-tests output. The collective comes from the footer (newer versions print the program name)
    or from `collective`; truncated or foreign output is a DomainError naming the line and the rule."""
    ranks: dict[int, tuple[str, str]] = {}
    rows: list[NcclRow] = []
    avg: float | None = None
    found: Collective | None = None
    header = False
    last = 0
    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip()
        if not line.strip():
            continue
        last = n
        if m := _RANK.match(line):
            ranks[int(m.group(1))] = (m.group(2), m.group(4))
        elif line.startswith("#") and "size" in line and "busbw" in line:
            header = True
        elif m := _AVG.match(line):
            avg = _number(m.group(1), n, "Avg bus bandwidth")
        elif m := _CONCLUDED.match(line):
            found = _collective_of(m.group(1))
        elif (m := _OUT_OF_BOUNDS.match(line)) and int(m.group(1)) > 0:
            raise DomainError(FIELD, f"line {n}: {m.group(1)} out-of-bounds values: the run failed its data check")
        elif not line.startswith("#") and header:
            r = _ROW.match(line)
            if r is None:
                raise DomainError(
                    FIELD,
                    f"line {n}: not a result row of size, count, type, redop, root, time, "
                    f"algbw, busbw: {line.strip()[:80]!r}",
                )
            g = r.groups()
            size, count = int(g[0]), int(g[1])
            time_us = _number(g[5], n, "time")
            algbw, busbw = _number(g[6], n, "algbw"), _number(g[7], n, "busbw")
            if time_us <= 0 or algbw < 0 or busbw < 0:
                raise DomainError(FIELD, f"line {n}: time must be positive and bandwidths not negative")
            in_place = _number(g[11], n, "in-place busbw") if g[11] is not None else None
            rows.append(
                NcclRow(
                    size_bytes=size,
                    count=count,
                    dtype=g[2],
                    redop=g[3],
                    time_us=time_us,
                    algbw_gbs=algbw,
                    busbw_gbs=busbw,
                    in_place_busbw_gbs=in_place,
                )
            )
    if not header:
        raise DomainError(FIELD, "not nccl-tests output: no '# size count type redop root time algbw busbw' header")
    if not rows:
        raise DomainError(FIELD, "no result rows after the table header (truncated output?)")
    if avg is None:  # every run ends its table with the footer (src/common.cu), also when it fails a check
        raise DomainError(
            FIELD, f"line {last}: the output ends without the '# Avg bus bandwidth' footer (truncated output?)"
        )
    kind = found or collective
    if kind is None:
        raise DomainError(
            FIELD, f"the output does not name its collective (older nccl-tests): give it ({', '.join(COLLECTIVES)})"
        )
    if found is not None and collective is not None and found != collective:
        raise DomainError(FIELD, f"the output is {found}_perf, not {collective}")
    hosts: list[str] = []
    for rank in sorted(ranks):
        if ranks[rank][0] not in hosts:
            hosts.append(ranks[rank][0])
    gpus = {g for _, g in ranks.values()}
    return NcclTestRun(
        collective=kind,
        ranks=len(ranks),
        hosts=tuple(hosts),
        gpu=gpus.pop() if len(gpus) == 1 else None,
        rows=tuple(rows),
        avg_busbw_gbs=avg,
    )
