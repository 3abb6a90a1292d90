"""Option groups: options several `meshplan` commands take, declared once as a dataclass.

Typer reads a command's options from its signature. A parameter annotated `OptionGroup[G]`, G a dataclass whose
fields are typer-annotated options with their defaults, stands, in the `--help` order, for G's fields; the command
receives the G built from them. So a shared option, its help and its default live in one place.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable
from typing import Annotated, Any, TypeVar, get_args, get_origin, get_type_hints

R = TypeVar("R")
G = TypeVar("G")


class _Spread:
    """The mark of an option-group parameter."""


OptionGroup = Annotated[G, _Spread()]
"""A command parameter standing for the options of the dataclass G (the command receives a G)."""


def group_parameters(group: type) -> list[inspect.Parameter]:
    """The group's fields as keyword-only parameters (typer-annotated type, default), in declaration order."""
    hints = get_type_hints(group, include_extras=True)
    return [
        inspect.Parameter(
            f.name,
            inspect.Parameter.KEYWORD_ONLY,
            annotation=hints[f.name],
            default=inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default,
        )
        for f in dataclasses.fields(group)
    ]


def option_group(annotation: object) -> type | None:
    """The dataclass of an `OptionGroup[...]` annotation (None: an ordinary parameter)."""
    marks = getattr(annotation, "__metadata__", ()) if get_origin(annotation) is Annotated else ()
    if not any(isinstance(m, _Spread) for m in marks):
        return None
    group = get_args(annotation)[0]
    if not (isinstance(group, type) and dataclasses.is_dataclass(group)):
        raise TypeError(f"OptionGroup takes a dataclass of typer options (got {group!r})")
    return group


def with_option_groups(command: Callable[..., R]) -> Callable[..., R]:
    """The command with each option-group parameter spread into the group's options (what typer reads) and the
    group rebuilt from them before the call (what the command receives). Every parameter must be keyword-only."""
    signature = inspect.signature(command, eval_str=True)
    groups: dict[str, type] = {}
    parameters: list[inspect.Parameter] = []
    for param in signature.parameters.values():
        group = option_group(param.annotation)
        if group is not None:
            groups[param.name] = group
            parameters += group_parameters(group)
        else:
            parameters.append(param)

    @functools.wraps(command)
    def run(**options: Any) -> R:
        for name, group in groups.items():
            options[name] = group(**{f.name: options.pop(f.name) for f in dataclasses.fields(group)})
        return command(**options)

    spread = signature.replace(parameters=parameters)
    run.__signature__ = spread  # type: ignore[attr-defined]
    run.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": signature.return_annotation}
    return run
