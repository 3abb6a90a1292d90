"""Megatron's `--pipeline-model-parallel-layout` strings: parsed as Megatron parses them
(megatron/core/transformer/pipeline_parallel_layer_layout.py `parse_str_to_list`, Megatron-LM d98e8a6) into the
decoder layers of every virtual stage, with the rules this planner prices (optimizer/spec/stage_layers.py) checked and
named.

Syntax: stages split by `|`; `E` the embedding, `t` a decoder layer, `m` a multi-token prediction layer, `L` the
loss; `x*n` repeats a symbol, `(...)*n` a group; commas are cosmetic. Virtual stage k x pp + r is rank r's chunk k.
MTP layers follow every decoder layer, all in one virtual stage (Megatron's rules); this planner prices them on the
last rank, beside the loss (Megatron's "standalone" MTP on another rank is not modelled).
"""

from __future__ import annotations

import functools
import re

from optimizer.errors import DomainError
from optimizer.spec.stage_layers import virtual_split

FIELD = "config.pipeline_layout"
MAX_EXPANDED = 100_000  # characters after unrolling: far above any real model, far below a memory blow-up
_GROUP = re.compile(r"\(([^)]+)\)\*(\d+)")
_SINGLE = re.compile(r"(.)\*(\d+)")


def _unroll(text: str) -> str:
    for pattern in (_GROUP, _SINGLE):
        for m in pattern.finditer(text):
            if len(m.group(2)) > 6 or len(m.group(1)) * int(m.group(2)) > MAX_EXPANDED:
                raise DomainError(FIELD, f"the repetition {m.group(0)[:40]!r} unrolls beyond {MAX_EXPANDED} symbols")
        text = pattern.sub(lambda m: m.group(1) * int(m.group(2)), text)
        if len(text) > MAX_EXPANDED:
            raise DomainError(FIELD, f"the layout unrolls beyond {MAX_EXPANDED} symbols")
    return text


def layout_chunks(text: str, pp: int) -> tuple[tuple[int, ...], ...]:
    """Decoder layers of each rank's virtual stages of a layout `parse_layout` accepted: result[r][k] is rank r's
    chunk k."""
    stages = _stages(text)
    vp = len(stages) // pp
    return tuple(tuple(stages[k * pp + r].count("t") for k in range(vp)) for r in range(pp))


def rank_chunks(layout: str | None, pp: int, vp: int, rank: int, layers: int) -> list[int]:
    """Decoder layers of rank `rank`'s virtual stages: the layout's own when one is given, else the canonical
    split of its `layers` (stage_layers.virtual_split). The memory model and the exports price and write this."""
    if layout is not None:
        return list(layout_chunks(layout, pp)[rank])
    return virtual_split(layers, vp)


def layout_vp(text: str, pp: int) -> int:
    """Virtual stages per rank a layout implies over pp ranks (stages / pp, at least 1; parse_layout checks)."""
    return max(1, len(_stages(text)) // max(1, pp))


@functools.lru_cache(maxsize=256)
def _stages(text: str) -> tuple[str, ...]:
    if len(text) > 10_000:
        raise DomainError(FIELD, "must be at most 10,000 characters")
    return tuple(_unroll(text.replace(",", "").replace(" ", "")).split("|"))


@functools.lru_cache(maxsize=256)
def parse_layout(text: str, pp: int, num_layers: int, mtp_layers: int = 0) -> tuple[tuple[int, ...], ...]:
    """Decoder layers of each rank's virtual stages: result[r][k] is rank r's chunk k. Raises a DomainError naming
    the rule a layout breaks."""
    stages = list(_stages(text))
    flat = "|".join(stages)
    for i, stage in enumerate(stages):
        bad = sorted(set(stage) - set("EtLm"))
        if bad:
            raise DomainError(FIELD, f"stage {i} has unknown symbols {''.join(bad)!r}; known: E, t, m (MTP), L")
    if flat.count("m") != mtp_layers:
        raise DomainError(FIELD, f"holds {flat.count('m')} MTP layers (m); the model has mtp_layers={mtp_layers}")
    if mtp_layers:
        if "t" in flat[flat.index("m") :]:
            raise DomainError(FIELD, "MTP layers (m) must follow every decoder layer (t)")
        if stages[-1].count("m") != mtp_layers:
            raise DomainError(
                FIELD,
                "MTP layers (m) must all sit in the last virtual stage, with the loss (MTP on another rank, "
                "Megatron's standalone MTP, is not modelled)",
            )
    if flat.count("E") != 1 or not stages[0].startswith("E"):
        raise DomainError(FIELD, "the embedding E must appear once, first in stage 0")
    if flat.count("L") != 1 or not stages[-1].endswith("L"):
        raise DomainError(FIELD, "the loss L must appear once, last in the last stage")
    decoders = flat.count("t")
    if decoders != num_layers:
        raise DomainError(FIELD, f"holds {decoders} decoder layers (t); the model has {num_layers}")
    if len(stages) % pp:
        raise DomainError(FIELD, f"has {len(stages)} stages, not a multiple of pp={pp}")
    for i, stage in enumerate(stages):
        if not stage:
            raise DomainError(
                FIELD,
                f"virtual stage {i} (rank {i % pp}, chunk {i // pp}) is empty; every virtual stage holds a decoder "
                "layer, the embedding or the loss",
            )
    ranks = layout_chunks(text, pp)
    for r, chunks in enumerate(ranks):
        if not sum(chunks):
            raise DomainError(FIELD, f"pipeline rank {r} holds no decoder layer")
    return ranks
