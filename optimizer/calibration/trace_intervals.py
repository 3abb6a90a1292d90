"""Unions and overlaps of time intervals (a trace's kernels), numpy only. The merge is HTA's
[hta/utils/utils.py merge_kernel_intervals: sort by start, a new group where a start passes the running maximum
end]."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray


@dataclass(frozen=True)
class Intervals:
    """Disjoint, sorted intervals [starts[i], ends[i])."""

    starts: NDArray[np.float64]
    ends: NDArray[np.float64]

    @property
    def length(self) -> float:
        return float(np.sum(self.ends - self.starts))

    @property
    def start(self) -> float:
        return float(self.starts[0]) if len(self.starts) else 0.0

    @property
    def end(self) -> float:
        return float(self.ends[-1]) if len(self.ends) else 0.0

    def overlap(self, other: Intervals) -> float:
        """Total time inside both."""
        if not len(self.starts) or not len(other.starts):
            return 0.0
        # Every boundary of both; a piece between two boundaries is inside a set when its midpoint is.
        cuts = np.unique(np.concatenate([self.starts, self.ends, other.starts, other.ends]))
        mids = (cuts[:-1] + cuts[1:]) / 2
        inside = _contains(self, mids) & _contains(other, mids)
        return float(np.sum(np.diff(cuts)[inside]))


def _contains(iv: Intervals, points: NDArray[np.float64]) -> NDArray[np.bool_]:
    i = np.searchsorted(iv.starts, points, side="right") - 1
    ok = i >= 0
    out = np.zeros(points.shape, dtype=bool)
    out[ok] = points[ok] < iv.ends[i[ok]]
    return out


def union(pairs: list[tuple[float, float]]) -> Intervals:
    """The union of [start, end) pairs as disjoint intervals."""
    if not pairs:
        empty = np.zeros(0, dtype=np.float64)
        return Intervals(empty, empty)
    arr = np.array(pairs, dtype=np.float64)
    arr = arr[np.argsort(arr[:, 0], kind="stable")]
    starts, ends = arr[:, 0], arr[:, 1]
    running = np.maximum.accumulate(ends)
    # HTA: a new group where ts > the running maximum end of the previous ones (touching intervals merge).
    new = np.ones(len(starts), dtype=bool)
    new[1:] = starts[1:] > running[:-1]
    group = np.cumsum(new) - 1
    n = int(group[-1]) + 1
    g_start = np.full(n, np.inf)
    g_end = np.full(n, -np.inf)
    np.minimum.at(g_start, group, starts)
    np.maximum.at(g_end, group, ends)
    return Intervals(g_start, g_end)
