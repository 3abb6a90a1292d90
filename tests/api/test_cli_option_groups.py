"""Option groups: a dataclass of typer options spread into a command's signature, rebuilt for its body."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Annotated

import pytest
import typer
from typer.testing import CliRunner

from api.cli_option_groups import OptionGroup, with_option_groups


@dataclass(frozen=True)
class Sizes:
    width: Annotated[int, typer.Option(help="Width, px.")] = 3
    name: Annotated[str | None, typer.Option("--label", help="A label.")] = None


def test_a_group_is_spread_in_place_and_rebuilt() -> None:
    seen: list[object] = []

    @with_option_groups
    def command(*, first: Annotated[int, typer.Option()] = 0, sizes: OptionGroup[Sizes], last: bool = False) -> None:
        seen.append((first, sizes, last))

    assert list(inspect.signature(command).parameters) == ["first", "width", "name", "last"]
    app = typer.Typer()
    app.command()(command)
    app.command("other")(lambda: None)  # two commands: typer keeps the command name
    result = CliRunner().invoke(app, ["command", "--width", "5", "--label", "x", "--first", "1"])
    assert result.exit_code == 0, result.output
    assert seen == [(1, Sizes(width=5, name="x"), False)]


def test_an_option_group_must_be_a_dataclass() -> None:
    def command(*, sizes: OptionGroup[int]) -> None: ...

    with pytest.raises(TypeError, match="dataclass"):
        with_option_groups(command)
