"""How every command ends on bad input: one line on stderr, exit code 2."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import NoReturn

import typer
from rich.console import Console

from optimizer.errors import DomainError

err = Console(stderr=True, width=None if sys.stderr.isatty() else 300)
out = Console(width=None if sys.stdout.isatty() else 150)


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


def write_output(text: str, path: Path | None) -> None:
    """A command's document on stdout, or into `path` only once it is whole: a temporary file beside it renamed
    over it, so a failed command leaves no empty or half-written file (a shell's `> file` is created before the
    command runs) [issue 48 §9]."""
    if path is None:
        sys.stdout.write(text)
        return
    target = path.expanduser()
    try:
        special = target.exists() and not target.is_file()
    except OSError as exc:  # a name too long for the file system, a path through a file
        fail(DomainError("--output", f"cannot write {str(path)[:200]}: {exc.strerror or exc}"))
    if special:  # a directory, a device (/dev/null), a pipe: never replaced
        fail(DomainError("--output", f"{str(path)[:200]} is not a regular file"))
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        fail(DomainError("--output", f"cannot write {str(path)[:200]}: {exc.strerror or exc}"))
    err.print(f"wrote {target}", markup=False, highlight=False, soft_wrap=True)


def fail(exc: Exception) -> NoReturn:
    """One line on stderr, exit code 2: how every bad input ends."""
    err.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(code=BAD_INPUT)
