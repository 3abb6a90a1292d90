"""Usage errors (an option of the wrong type, a missing or unknown option) as one line, like every other bad input.

Typer prints click's usage errors in a 5-6 line box; the README promises one line naming the field and exit code 2.
The root command group runs click in non-standalone mode and prints the error itself (issue 37 §5).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any, NoReturn

import typer
from typer._click import exceptions as click_errors  # the click typer vendors (typer.core uses it too)
from typer.core import TyperGroup

from api.cli_output import err


def usage_line(exc: click_errors.ClickException) -> str:
    """The error as one line: click's message, then where the command's help is."""
    message = " ".join(exc.format_message().split())
    path = getattr(getattr(exc, "ctx", None), "command_path", None)
    hint = f" (see '{path} --help')" if isinstance(path, str) else ""
    return f"error: {message}{hint}"


class OneLineErrorGroup(TyperGroup):
    """The `meshplan` group: a usage error is one line on stderr and exit code 2, never a box."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        try:
            code = super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        except click_errors.NoArgsIsHelpError as exc:  # `meshplan` alone, or a group alone: its help
            exc.show()
            _exit(exc.exit_code)
        except click_errors.ClickException as exc:
            err.print(usage_line(exc), markup=False, highlight=False, soft_wrap=True)
            _exit(exc.exit_code)
        except typer.Abort:
            err.print("aborted", markup=False, highlight=False)
            _exit(1)
        _exit(code if isinstance(code, int) else 0)


def _exit(code: int) -> NoReturn:
    sys.exit(code)
