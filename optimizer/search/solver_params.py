"""CP-SAT parameters in one place."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from optimizer.search.cpsat import cp_model

# Times in the CP-SAT models are integers in nanoseconds: the plan's objective agrees with `estimate` to within
# (number of rounded terms) x 0.5 ns, far below a microsecond.
TIME_UNIT_S = 1e-9


def stage_solver(time_limit_s: float, workers: int = 1) -> cp_model.CpSolver:
    """Solver for one candidate's stage layout: small models, many of them, so one worker and no logging."""
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(0.01, time_limit_s)
    solver.parameters.num_workers = workers
    solver.parameters.log_search_progress = False
    solver.parameters.cp_model_presolve = True
    solver.parameters.symmetry_level = 2
    # No LP relaxation (sat_parameters.proto linearization_level 0; default 1): the element tables' relaxation
    # is weak and the model already carries the layer-balance bound as a constraint (_objective). Measured with
    # benchmarks/solver.py (median of 5): DeepSeek-V3 (5b) 0.69 -> 0.53 s, heterogeneous (3) 1.02 -> 0.95 s,
    # the others unchanged; every optimum the same.
    solver.parameters.linearization_level = 0
    return solver


@contextmanager
def stop_when(solver: cp_model.CpSolver, stop: Callable[[], bool] | None, every_s: float = 0.1) -> Iterator[None]:
    """Stop `solver` within `every_s` of `stop()` turning true (a cancelled job stops its solver promptly)."""
    if stop is None:
        yield
        return
    done = threading.Event()

    def watch() -> None:
        while not done.wait(every_s):
            if stop():
                solver.stop_search()
                return

    thread = threading.Thread(target=watch, name="cp-sat-stop", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def fleet_solver(time_limit_s: float) -> cp_model.CpSolver:
    """Solver for an SLA fleet (integer replica counts over a few dozen shapes): small, so few workers."""
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(0.01, time_limit_s)
    solver.parameters.num_workers = 2
    solver.parameters.log_search_progress = False
    return solver
