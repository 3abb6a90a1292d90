"""The phases of a step as the frameworks' own timers print them [issue 54 §2], beside the step time run_logs.py
reads. Each reader returns seconds per step by phase (the timer's name as printed), the median over the logged
blocks after the warm-up ones (the same count run_logs.py skips), or {} when the log has no timer lines.

- megatron (`--timing-log-level 1` or `2`): after each iteration line, Megatron-Core's Timers.log prints
  '(min, max) time across ranks (ms):' then one line per timer '    {name + " " padded with dots to 48}: ({min:.2f},
  {max:.2f})' (`--timing-log-option minmax`, the default), 'max time across ranks (ms):' with '...: {max:.2f}'
  (`max`), or 'times across ranks (ms):' with '  {name}:' and '     rank {r:2d}: {t:.2f}' lines (`all`); the values are
  per iteration (normalised by the log interval) [Megatron-LM core_v0.19.0 5be9626 megatron/core/timers.py
  _get_global_min_max_time_string, _get_all_ranks_time_string; megatron/training/training.py training_log:
  timers_to_log, level 1: forward-backward, layernorm-grads-all-reduce, embedding-grads-all-reduce, all-grads-sync,
  params-all-gather, optimizer-*, optimizer; level 2 adds batch-generator, forward-compute, backward-compute and the
  pipeline forward/backward send/recv timers; releases before core_r0.9 print grads-all-reduce /
  grads-reduce-scatter]. The phase is the slowest rank's (the step waits for it).
- deepspeed (`"wall_clock_breakdown": true`): at each optimizer step the engine logs its global timers as 'time (ms) |
  fwd: X | bwd: Y | bwd_inner: Z | bwd_allreduce: W | step: V' (and per micro-step the `*_microstep` ones, not read
  here) [DeepSpeed edaa722 deepspeed/utils/timer.py SynchronizedWallClockTimer.log, FORWARD_GLOBAL_TIMER 'fwd' ...
  STEP_GLOBAL_TIMER 'step'; deepspeed/runtime/engine.py step: self.timers.log(self.engine_timers.global_timers)].
- torchtitan: its console line has no phases; its metrics dict, written to TensorBoard / W&B (or a JSON-lines
  dump of it), has "time_metrics/end_to_end(s)" and "time_metrics/data_loading(s)" per step [torchtitan
  torchtitan/components/metrics.py MetricsProcessor.log].
"""

from __future__ import annotations

import re
import statistics

_NUM = r"([0-9][0-9,]*\.?[0-9]*(?:[eE][+-]?[0-9]+)?)"
_MLM_ITER = re.compile(r"iteration\s+(\d+)\s*/\s*\d+\s*\|")
_MLM_HEADER = re.compile(r"(\(min, max\) time across ranks|max time across ranks|times across ranks) \(ms\):")
_MLM_MINMAX = re.compile(r"^\s+([A-Za-z][\w/-]*) \.*: \(" + _NUM + r", " + _NUM + r"\)")
_MLM_MAX = re.compile(r"^\s+([A-Za-z][\w/-]*) \.*: " + _NUM + r"\s*$")
_MLM_ALL_NAME = re.compile(r"^\s{2}([A-Za-z][\w/-]*):\s*$")
_MLM_ALL_RANK = re.compile(r"^\s+rank\s+\d+: " + _NUM + r"\s*$")
_DS_TIMES = re.compile(r"time \(ms\)((?: \| [A-Za-z_]+: " + _NUM + r")+)")
_DS_PAIR = re.compile(r"([A-Za-z_]+): " + _NUM)
_TITAN = {
    "end_to_end": re.compile(r'"time_metrics/end_to_end\(s\)":\s*' + _NUM),
    "data_loading": re.compile(r'"time_metrics/data_loading\(s\)":\s*' + _NUM),
}
MS = 1e-3


def _f(text: str) -> float:
    return float(text.replace(",", ""))


def _median_blocks(blocks: list[dict[str, float]], warmup: int) -> dict[str, float]:
    """Per phase, the median over the blocks after the first `warmup` ones (all of them when there are no more)."""
    used = blocks[warmup:] or blocks
    names = sorted({k for b in used for k in b})
    return {k: statistics.median([b[k] for b in used if k in b]) for k in names}


def _megatron_line(line: str, block: dict[str, float], current: list[str]) -> bool:
    """Read one line of a timers block into `block` (False: the line is not one, the block has ended)."""
    m = _MLM_MINMAX.match(line) or _MLM_MAX.match(line)
    if m:
        block[m.group(1)] = _f(m.groups()[-1]) * MS  # the max across ranks
        return True
    name = _MLM_ALL_NAME.match(line)
    if name:
        current[:] = [name.group(1)]
        return True
    rank = _MLM_ALL_RANK.match(line)
    if rank and current:
        block[current[0]] = max(block.get(current[0], 0.0), _f(rank.group(1)) * MS)
        return True
    return False


def megatron_phases(text: str, warmup: int) -> dict[str, float]:
    """Megatron-LM's timers, seconds per iteration by timer, the slowest rank's."""
    blocks: dict[int, dict[str, float]] = {}
    iteration, block, current = -1, None, [""]
    for line in text.splitlines():
        it = _MLM_ITER.search(line)
        if it:
            iteration, block = int(it.group(1)), None
        elif _MLM_HEADER.search(line):
            block, current = blocks.setdefault(iteration, {}), []
        elif block is not None and not _megatron_line(line, block, current):
            block = None
    return _median_blocks([blocks[k] for k in sorted(blocks) if blocks[k]], warmup)


def deepspeed_phases(text: str, warmup: int) -> dict[str, float]:
    """DeepSpeed's wall-clock breakdown: the global timers of each optimizer step, seconds."""
    blocks = []
    for m in _DS_TIMES.finditer(text):
        pairs = {k: _f(v) * MS for k, v in _DS_PAIR.findall(m.group(1)) if not k.endswith("_microstep")}
        if pairs:
            blocks.append(pairs)
    return _median_blocks(blocks, warmup)


def torchtitan_phases(text: str, warmup: int) -> dict[str, float]:
    """torchtitan's time metrics, where the log holds its metrics dict, seconds per step."""
    found = {k: [_f(m.group(1)) for m in rx.finditer(text)] for k, rx in _TITAN.items()}
    n = max(len(v) for v in found.values())
    blocks = [{k: v[i] for k, v in found.items() if i < len(v)} for i in range(n)]
    return _median_blocks(blocks, warmup)
