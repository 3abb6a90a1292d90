"""Slurm hostlist expressions: `gpu[01-08,12],login1` -> gpu01..gpu08, gpu12, login1.

The syntax of Slurm's own parser [SchedMD/slurm src/common/hostlist.c]: names separated by commas outside
brackets; a bracket holds comma-separated numbers or ranges `lo-hi`, zero-padded to the width of `lo`; a name may
hold several brackets (`rack[1-2]-n[1-4]`, the cartesian product, as Slurm's multi-dimensional ranges).
"""

from __future__ import annotations

import itertools
import re

from optimizer.errors import DomainError

# A topology line naming a million hosts is a mistake, not a cluster (the largest fleets hold ~25,000 nodes).
MAX_HOSTS = 1_000_000

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def _split_top_level(expr: str, field: str) -> list[str]:
    """The comma-separated names of `expr`, commas inside brackets kept."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in expr:
        if ch == "[":
            depth += 1
            if depth > 1:
                raise DomainError(field, f"nested '[' in hostlist {expr!r}")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise DomainError(field, f"unmatched ']' in hostlist {expr!r}")
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    if depth:
        raise DomainError(field, f"unmatched '[' in hostlist {expr!r}")
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


def _numbers(body: str, expr: str, field: str) -> list[str]:
    """The zero-padded numbers of one bracket body (`01-03,7` -> 01, 02, 03, 7)."""
    out: list[str] = []
    for item in body.split(","):
        m = _RANGE.match(item.strip())
        if m is None:
            raise DomainError(field, f"bad range {item!r} in hostlist {expr!r} (expected N or LO-HI)")
        lo_s, hi_s = m.group(1), m.group(2) or m.group(1)
        lo, hi = int(lo_s), int(hi_s)
        if hi < lo:
            raise DomainError(field, f"range {item!r} in hostlist {expr!r} runs backwards")
        if len(out) + hi - lo + 1 > MAX_HOSTS:
            raise DomainError(field, f"hostlist {expr!r} names more than {MAX_HOSTS:,} hosts")
        width = len(lo_s)
        out.extend(f"{i:0{width}d}" for i in range(lo, hi + 1))
    return out


def expand_hostlist(expr: str, field: str = "hostlist") -> list[str]:
    """Every host named by a Slurm hostlist expression, in order."""
    hosts: list[str] = []
    for name in _split_top_level(expr, field):
        pieces = re.split(r"(\[[^\]]*\])", name)
        choices: list[list[str]] = []
        for piece in pieces:
            if piece.startswith("["):
                choices.append(_numbers(piece[1:-1], expr, field))
            elif piece:
                choices.append([piece])
        total = 1
        for c in choices:
            total *= len(c)
        if len(hosts) + total > MAX_HOSTS:
            raise DomainError(field, f"hostlist {expr!r} names more than {MAX_HOSTS:,} hosts")
        hosts.extend("".join(p) for p in itertools.product(*choices))
    return hosts
