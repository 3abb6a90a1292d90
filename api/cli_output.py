"""How every command ends on bad input: one line on stderr, exit code 2."""

from __future__ import annotations

import sys
from typing import NoReturn

import typer
from rich.console import Console

err = Console(stderr=True, width=None if sys.stderr.isatty() else 300)


# The exit codes of `meshplan plan` and `meshplan estimate`, one contract (README "Exit codes") [issue 48 §2]:
FITS = 0
"""estimate: the configuration fits (or was reported as run); plan: a plan was found (OPTIMAL, FEASIBLE, REPORTED)."""
DOES_NOT_FIT = 1
"""estimate: the configuration does not fit; plan: INFEASIBLE (proven: nothing fits)."""
BAD_INPUT = 2
"""Bad input: one line on stderr naming the field and the rule."""
NOT_DECIDED = 3
"""plan: UNKNOWN, no plan found within the time limit (nothing is proven: never called infeasible)."""


def plan_exit_code(status: str) -> int:
    """The exit code of a plan with this solver status."""
    return {"INFEASIBLE": DOES_NOT_FIT, "UNKNOWN": NOT_DECIDED}.get(status, FITS)


def finish(code: int) -> None:
    """End the command with `code` after its output (nothing to do for 0)."""
    if code != FITS:
        sys.stdout.flush()
        raise typer.Exit(code=code)


def fail(exc: Exception) -> NoReturn:
    """One line on stderr, exit code 2: how every bad input ends."""
    err.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(code=BAD_INPUT)
