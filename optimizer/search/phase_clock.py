"""Where a search's time goes, by phase (issue 49: `benchmarks/solver.py` prints them; a plan's JSON carries them)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


class PhaseClock:
    """Wall seconds per named phase, summed over the phase's visits. A phase timed inside another is reported
    apart and taken out of the outer one where the search says so (`nested`)."""

    def __init__(self, nested: dict[str, str] | None = None) -> None:
        self.seconds: dict[str, float] = {}
        self.nested = nested or {"cp-sat": "layouts"}  # inner phase -> the phase it runs inside

    @contextmanager
    def __call__(self, phase: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.add(phase, time.perf_counter() - t0)

    def add(self, phase: str, seconds: float) -> None:
        self.seconds[phase] = self.seconds.get(phase, 0.0) + seconds

    def phases(self) -> dict[str, float]:
        """Seconds per phase, an inner phase's time taken out of its outer one (never below 0)."""
        out = dict(self.seconds)
        for inner, outer in self.nested.items():
            if inner in out and outer in out:
                out[outer] = max(0.0, out[outer] - out[inner])
        return {k: round(v, 6) for k, v in out.items()}
