"""Option groups: options several `meshplan` commands take, declared once as a dataclass.

Typer reads a command's options from its signature. A parameter whose annotation is an option group (a dataclass
whose fields are typer-annotated options with their defaults) stands, in the `--help` order, for the group's fields;
the command receives the group built from them. So a shared option, its help and its default live in one place.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar, get_type_hints

R = TypeVar("R")


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


def is_option_group(annotation: object) -> bool:
    """Whether a parameter's annotation is an option group (a dataclass type)."""
    return isinstance(annotation, type) and dataclasses.is_dataclass(annotation)


def with_option_groups(command: Callable[..., R]) -> Callable[..., R]:
    """The command with each option-group parameter spread into the group's options (what typer reads) and the
    group rebuilt from them before the call (what the command receives). Every parameter must be keyword-only."""
    signature = inspect.signature(command, eval_str=True)
    groups: dict[str, type] = {}
    parameters: list[inspect.Parameter] = []
    for param in signature.parameters.values():
        if is_option_group(param.annotation):
            groups[param.name] = param.annotation
            parameters += group_parameters(param.annotation)
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
