"""What an exporter returns (Export) and how a command line of flags is written."""

from __future__ import annotations

import shlex
from typing import Literal

from pydantic import BaseModel, Field

from optimizer.spec.names import ExportName


class Export(BaseModel):
    """A launcher configuration."""

    tool: ExportName
    format: Literal["args", "json", "toml", "bash", "yaml"]
    content: str = Field(
        description="Ready to paste: a command line, a JSON or TOML document, a Slurm batch script (bash) or a "
        "Kubernetes manifest (YAML)."
    )
    options: list[str] = Field(description="Every option name used (flags or dotted config keys).")
    env: dict[str, str] = Field(default_factory=dict, description="Environment variables to set.")
    notes: list[str] = Field(default_factory=list, description="What the tool cannot express, or must be set in code.")

    def script(self) -> str:
        """What is pasted, byte for byte, on every path (the CLI's text, the plan page's Copy button): one
        `export NAME=value` line per environment variable (value shell-quoted), then the content, ending in one
        newline. Never wrapped: a launch's continuation lines and long values (a pipeline layout) stay whole."""
        lines = [f"export {k}={shlex.quote(v)}\n" for k, v in self.env.items()]
        return "".join(lines) + self.content + ("" if self.content.endswith("\n") else "\n")


def flags(pairs: list[tuple[str, object | None]]) -> tuple[str, list[str]]:
    """A command line of (flag, value) pairs, one per continuation line, and the flags' names."""
    parts, names = [], []
    for name, value in pairs:
        names.append(name)
        parts.append(name if value is None else f"{name} {value}")
    return " \\\n  ".join(parts), names
