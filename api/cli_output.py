"""How every command ends on bad input: one line on stderr, exit code 2."""

from __future__ import annotations

import sys
from typing import NoReturn

import typer
from rich.console import Console

err = Console(stderr=True, width=None if sys.stderr.isatty() else 300)


def fail(exc: Exception) -> NoReturn:
    """One line on stderr, exit code 2: how every bad input ends."""
    err.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(code=2)
