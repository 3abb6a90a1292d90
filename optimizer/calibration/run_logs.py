"""Measurements from the logs people already have [issue 14]. Each parser reads the line its framework prints
(the format string is cited), skips warm-up steps and takes the median of the rest.

- megatron (Megatron-LM, Megatron-Bridge, NeMo 2 on Megatron-Core): ' iteration N/ M | ... | elapsed time per
  iteration (ms): X |' [MLM d98e8a6 megatron/training/training.py training_log] and '... memory (MB) | allocated:
  A | max allocated: B | reserved: C | max reserved: D' in MiB [MLM megatron/training/utils/common_utils.py
  report_memory].
- torchtitan: 'step: N  loss: L  grad_norm: G  memory: X GiB(P%)  tps: T  tflops: F  mfu: U%'; memory is the
  peak reserved GiB, tps is tokens per second per GPU (tokens over time x the non-data-parallel size)
  [torchtitan b5bcd76 torchtitan/components/metrics.py].
- deepspeed: 'epoch=E/micro_step=M/global_step=G, RunningAvgSamplesPerSec=R, CurrSamplesPerSec=C,
  MemAllocated=AGB, MaxMemAllocated=BGB' (samples of the global batch, GiB) [DeepSpeed edaa722
  deepspeed/utils/timer.py ThroughputTimer]; the pipeline engine's 'steps: N loss: L iter time (s): T
  samples/sec: S' [deepspeed/runtime/pipe/engine.py]; see_memory_usage's 'MA a GB Max_MA b GB CA c GB Max_CA d GB'
  [deepspeed/runtime/utils.py].
- the phases beside the step time (Megatron-LM's timers, DeepSpeed's wall-clock breakdown, torchtitan's time
  metrics): run_log_phases.py, in `Measurement.phases_s`.
- nemo (NeMo 1/2 Lightning progress): 'train_step_timing in s=X' (or ': X').
- vllm / sglang (`vllm bench serve`, `sglang.bench_serving`): the 'Serving Benchmark Result' block: 'Median TTFT
  (ms):', 'Median TPOT (ms):', 'Output token throughput (tok/s):'.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from typing import Literal

from optimizer.calibration.measurements import Measurement
from optimizer.calibration.run_log_phases import deepspeed_phases, megatron_phases, torchtitan_phases
from optimizer.errors import DomainError
from optimizer.spec.workload import InferenceWorkload, TrainingWorkload

LogFormat = Literal["megatron", "torchtitan", "deepspeed", "nemo", "vllm", "sglang"]
LOG_FORMATS: tuple[LogFormat, ...] = ("megatron", "torchtitan", "deepspeed", "nemo", "vllm", "sglang")
LogFormatChoice = LogFormat | Literal["auto"]
# Steps dropped from the start of a log: the first iterations include compilation, NCCL set-up and allocator
# growth (Megatron prints the first iteration on purpose "to document initialization overhead" [MLM training.py]).
DEFAULT_WARMUP = 3
MAX_LOG_CHARS = 50_000_000
MIB, GIB = 1024.0**2, 1024.0**3

_NUM = r"([0-9][0-9,]*\.?[0-9]*(?:[eE][+-]?[0-9]+)?)"
_MEGATRON_ITER = re.compile(r"iteration\s+(\d+)\s*/\s*\d+\s*\|.*?elapsed time per iteration \(ms\):\s*" + _NUM)
_MEGATRON_MEM = re.compile(r"max allocated:\s*" + _NUM + r".*?max reserved:\s*" + _NUM)
_TITAN_STEP = re.compile(r"step:\s*(\d+)\s+loss:.*?memory:\s*" + _NUM + r"\s*GiB.*?tps:\s*" + _NUM)
_DS_TIMER = re.compile(r"global_step=(\d+),.*?CurrSamplesPerSec=" + _NUM + r"(?:.*?MaxMemAllocated=" + _NUM + r"GB)?")
_DS_PIPE = re.compile(r"steps:\s*(\d+)\b.*?iter time \(s\):\s*" + _NUM)
_DS_MEM = re.compile(r"Max_MA\s+" + _NUM + r"\s*GB.*?Max_CA\s+" + _NUM + r"\s*GB")
_NEMO_STEP = re.compile(r"train_step_timing in s\s*[=:]\s*" + _NUM)
_SERVE = {
    "ttft": re.compile(r"Median TTFT \(ms\):\s*" + _NUM),
    "tpot": re.compile(r"Median TPOT \(ms\):\s*" + _NUM),
    "out_tps": re.compile(r"Output token throughput \(tok/s\):\s*" + _NUM),
}


def _f(text: str) -> float:
    return float(text.replace(",", ""))


@dataclass(frozen=True)
class ParsedLog:
    """A log's measurement and how it was read."""

    format: LogFormat
    measurement: Measurement
    steps_found: int
    steps_used: int


def _median_after_warmup(steps: list[tuple[int, float]], warmup: int, fmt: str) -> tuple[float, int, int]:
    if not steps:
        raise DomainError("log", f"no step-time lines found for the {fmt} format")
    # Keep the last reading of each step (a log of several ranks repeats them), in step order.
    by_step = dict(steps)
    ordered = [by_step[k] for k in sorted(by_step)]
    used = ordered[warmup:]
    if not used:
        raise DomainError(
            "log", f"only {len(ordered)} step(s) found, all within the {warmup} warm-up steps; log more steps"
        )
    return statistics.median(used), len(ordered), len(used)


def detect_format(text: str) -> LogFormat:
    """The format whose step lines the log holds."""
    if _MEGATRON_ITER.search(text):
        return "megatron"
    if _TITAN_STEP.search(text):
        return "torchtitan"
    if _DS_TIMER.search(text) or _DS_PIPE.search(text):
        return "deepspeed"
    if _NEMO_STEP.search(text):
        return "nemo"
    if _SERVE["tpot"].search(text) or _SERVE["ttft"].search(text):
        return "sglang" if "Backend:" in text and "sglang" in text else "vllm"
    raise DomainError("log", "no known step or benchmark lines (megatron, torchtitan, deepspeed, nemo, vllm, sglang)")


def parse_log(
    text: str,
    fmt: LogFormatChoice = "auto",
    workload: TrainingWorkload | InferenceWorkload | None = None,
    gpus: int | None = None,
    warmup: int = DEFAULT_WARMUP,
) -> ParsedLog:
    """Read a measurement from a log. `workload` and `gpus` convert the throughput figures some formats print
    (samples/s, tokens/s per GPU) into a step time."""
    if len(text) > MAX_LOG_CHARS:
        raise DomainError("log", f"at most {MAX_LOG_CHARS:,} characters")
    if not 0 <= warmup <= 100_000:
        raise DomainError("warmup", "must be between 0 and 100000 steps")
    kind: LogFormat = detect_format(text) if fmt == "auto" else fmt
    if kind == "megatron":
        return _megatron(text, warmup)
    if kind == "torchtitan":
        return _torchtitan(text, warmup, workload, gpus)
    if kind == "deepspeed":
        return _deepspeed(text, warmup, workload)
    if kind == "nemo":
        step, found, used = _median_after_warmup(
            [(i, _f(m.group(1))) for i, m in enumerate(_NEMO_STEP.finditer(text))], warmup, kind
        )
        return ParsedLog(kind, Measurement(step_time_s=step, steps=used, source="nemo", framework="nemo"), found, used)
    return _serving(text, kind)


def _megatron(text: str, warmup: int) -> ParsedLog:
    steps = [(int(m.group(1)), _f(m.group(2)) / 1000) for m in _MEGATRON_ITER.finditer(text)]
    step, found, used = _median_after_warmup(steps, warmup, "megatron")
    mems = [(_f(m.group(1)) * MIB / 1e9, _f(m.group(2)) * MIB / 1e9) for m in _MEGATRON_MEM.finditer(text)]
    alloc = max((a for a, _ in mems), default=None)
    reserved = max((r for _, r in mems), default=None)
    m = Measurement(
        step_time_s=step,
        peak_allocated_gb=alloc,
        peak_reserved_gb=reserved if reserved and alloc and reserved >= alloc else None,
        phases_s=megatron_phases(text, warmup) or None,
        steps=used,
        source="megatron",
        framework="megatron",
    )
    return ParsedLog("megatron", m, found, used)


def _torchtitan(
    text: str, warmup: int, workload: TrainingWorkload | InferenceWorkload | None, gpus: int | None
) -> ParsedLog:
    rows = [(int(m.group(1)), _f(m.group(2)), _f(m.group(3))) for m in _TITAN_STEP.finditer(text)]
    tps, found, used = _median_after_warmup([(s, t) for s, _, t in rows], warmup, "torchtitan")
    if tps <= 0:
        raise DomainError("log", "torchtitan tps is zero")
    reserved = max(mem for _, mem, _ in rows) * GIB / 1e9
    step = None
    total_tps = None
    if gpus is not None:
        total_tps = tps * gpus  # tps is per GPU [torchtitan metrics.py]
        if isinstance(workload, TrainingWorkload):
            step = workload.tokens_per_step / total_tps
    if step is None and total_tps is None:
        raise DomainError("log", "a torchtitan log gives tokens/s per GPU: the plan's GPU count is needed")
    m = Measurement(
        step_time_s=step,
        tokens_per_s=total_tps,
        peak_reserved_gb=reserved,
        phases_s=torchtitan_phases(text, warmup) or None,
        steps=used,
        source="torchtitan",
        framework="torchtitan",
    )
    return ParsedLog("torchtitan", m, found, used)


def _deepspeed(text: str, warmup: int, workload: TrainingWorkload | InferenceWorkload | None) -> ParsedLog:
    timer = list(_DS_TIMER.finditer(text))
    alloc = None
    if timer:
        if not isinstance(workload, TrainingWorkload):
            raise DomainError("log", "DeepSpeed's throughput timer gives samples/s: a training workload is needed")
        gbs = workload.global_batch_size
        steps = [(int(m.group(1)), gbs / _f(m.group(2))) for m in timer if _f(m.group(2)) > 0]
        peaks = [_f(m.group(3)) * GIB / 1e9 for m in timer if m.group(3)]
        alloc = max(peaks, default=None)
    else:
        steps = [(int(m.group(1)), _f(m.group(2))) for m in _DS_PIPE.finditer(text)]
    step, found, used = _median_after_warmup(steps, warmup, "deepspeed")
    reserved = None
    mem = [(_f(m.group(1)) * GIB / 1e9, _f(m.group(2)) * GIB / 1e9) for m in _DS_MEM.finditer(text)]
    if mem:
        alloc = max(alloc or 0.0, max(a for a, _ in mem))
        reserved = max(c for _, c in mem)
    m = Measurement(
        step_time_s=step,
        peak_allocated_gb=alloc or None,
        peak_reserved_gb=reserved if reserved and alloc and reserved >= alloc else None,
        phases_s=deepspeed_phases(text, warmup) or None,
        steps=used,
        source="deepspeed",
        framework="deepspeed",
    )
    return ParsedLog("deepspeed", m, found, used)


def _serving(text: str, kind: LogFormat) -> ParsedLog:
    found = {k: [_f(m.group(1)) for m in rx.finditer(text)] for k, rx in _SERVE.items()}
    if not found["ttft"] and not found["tpot"]:
        raise DomainError("log", f"no 'Median TTFT (ms)' or 'Median TPOT (ms)' lines for the {kind} format")
    runs = max(len(v) for v in found.values())

    def med(k: str, scale: float) -> float | None:
        vals = [v for v in found[k] if v > 0]
        return statistics.median(vals) * scale if vals else None

    m = Measurement(
        ttft_s=med("ttft", 1e-3),
        tpot_s=med("tpot", 1e-3),
        tokens_per_s=med("out_tps", 1.0),
        steps=runs,
        source="vllm" if kind == "vllm" else "sglang",
        framework="vllm" if kind == "vllm" else "sglang",
    )
    return ParsedLog(kind, m, runs, runs)
