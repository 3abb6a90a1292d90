"""The pipeline schedule as a timeline: when each stage runs each micro-batch's forward and backward.

A list scheduler: each stage executes its operations in the schedule's order; an operation starts when its stage is
free and its dependency (the previous stage's forward, the next stage's backward) has finished. Orders follow
Megatron-LM's schedules (GPipe: all forwards then all backwards; 1F1B: p-s-1 warm-up forwards, then one forward one
backward; interleaved 1F1B: the virtual-stage order of `forward_backward_pipelining_with_interleaving`). ZB-H1 is
drawn with its 1F1B order (its split of the backward into input and weight gradients is not drawn).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Block:
    """One operation on one pipeline stage."""

    stage: int
    kind: str  # "F" or "B"
    microbatch: int
    chunk: int  # virtual stage (model chunk) on this rank
    start_s: float
    end_s: float


@dataclass(frozen=True)
class Timeline:
    stages: int
    microbatches: int
    vp: int
    blocks: list[Block]
    makespan_s: float
    bubble_fraction: float  # idle share of stage-time between the first start and the makespan
    truncated_from: int | None = None  # micro-batches in the step when fewer are drawn


def _order(schedule: str, p: int, s: int, m: int, vp: int) -> list[tuple[str, int, int]]:
    """(kind, microbatch, chunk) in the order stage `s` executes them."""
    if schedule == "gpipe":
        return [("F", i, 0) for i in range(m)] + [("B", i, 0) for i in range(m)]
    if vp == 1 or schedule != "interleaved-1f1b":
        warm = min(p - s - 1, m)
        ops: list[tuple[str, int, int]] = [("F", i, 0) for i in range(warm)]
        f, b = warm, 0
        while b < m:
            if f < m:
                ops.append(("F", f, 0))
                f += 1
            ops.append(("B", b, 0))
            b += 1
        return ops
    total = m * vp

    def fwd(k: int) -> tuple[str, int, int]:
        group, within = divmod(k, p * vp)
        return ("F", group * p + within % p, (within // p) % vp)

    def bwd(k: int) -> tuple[str, int, int]:
        group, within = divmod(k, p * vp)
        return ("B", group * p + within % p, vp - 1 - (within // p) % vp)

    warm = min((p - s - 1) * 2 + (vp - 1) * p, total)
    ops = [fwd(k) for k in range(warm)]
    f, b = warm, 0
    while b < total:
        if f < total:
            ops.append(fwd(f))
            f += 1
        ops.append(bwd(b))
        b += 1
    return ops


def simulate(
    schedule: str,
    forward_s: list[float],
    backward_s: list[float],
    microbatches: int,
    vp: int = 1,
    max_microbatches: int = 64,
) -> Timeline:
    """The timeline of one step. `forward_s`/`backward_s`: per stage, one micro-batch through all its chunks."""
    p = len(forward_s)
    m = microbatches
    truncated = None
    if m > max_microbatches:  # draw a prefix of the step (a multiple of p, as interleaving needs)
        truncated, m = m, max(p, (max_microbatches // p) * p) if vp > 1 else max_microbatches
    # Megatron interleaves only when m % p == 0; otherwise (and for other schedules) the plain order is drawn
    interleaved = schedule == "interleaved-1f1b" and vp > 1 and m % p == 0
    vp_eff = vp if interleaved else 1
    orders = [_order(schedule, p, s, m, vp_eff) for s in range(p)]
    done: dict[tuple[str, int, int, int], float] = {}  # (kind, mb, chunk, stage) -> end time
    free = [0.0] * p
    pos = [0] * p
    blocks: list[Block] = []
    remaining = sum(len(o) for o in orders)
    while remaining:
        progressed = False
        for s in range(p):
            while pos[s] < len(orders[s]):
                kind, mb, c = orders[s][pos[s]]
                if kind == "F":
                    dep = ("F", mb, c, s - 1) if s > 0 else (("F", mb, c - 1, p - 1) if c > 0 else None)
                else:
                    dep = ("B", mb, c, s + 1) if s < p - 1 else (("B", mb, c + 1, 0) if c < vp_eff - 1 else None)
                    own = ("F", mb, c, s)
                    if own not in done:
                        break
                if dep is not None and dep not in done:
                    break
                dur = (forward_s[s] if kind == "F" else backward_s[s]) / vp_eff
                start = max(
                    free[s],
                    done[dep] if dep is not None else 0.0,
                    done.get(("F", mb, c, s), 0.0) if kind == "B" else 0.0,
                )
                end = start + dur
                done[(kind, mb, c, s)] = end
                free[s] = end
                blocks.append(Block(s, kind, mb, c, start, end))
                pos[s] += 1
                remaining -= 1
                progressed = True
        if not progressed:
            raise RuntimeError("pipeline schedule deadlocked")  # an order bug, not an input error
    makespan = max(b.end_s for b in blocks)
    busy = sum(b.end_s - b.start_s for b in blocks)
    bubble = 1.0 - busy / (p * makespan) if makespan > 0 else 0.0
    return Timeline(p, m, vp_eff, blocks, makespan, bubble, truncated)
