"""What the serving-engine check.py scripts share (tests/frameworks/vllm-*/check.py, sglang-*/check.py): read the
payload `{"launches": [[arg, ...], ...]}` (each launch's argv after the launcher, as bash hands it over) from stdin,
parse each with the engine's own parser, and print one final line of JSON: `{"ok": true, "result": {"parsed":
[...]}}`, or `{"ok": false, "error": "launch N: what the engine said"}` for the first launch the engine refused.

Runs under an engine's pinned environment (not the project's): standard library only at import.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from collections.abc import Callable
from typing import Any

Parse = Callable[[list[str]], dict[str, Any]]


def refused(stderr: str, exc: BaseException) -> str:
    """The engine's own words: argparse's last stderr line on exit(2), else the exception."""
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    if isinstance(exc, SystemExit) and lines:
        return lines[-1]
    return f"{type(exc).__name__}: {exc}"


def read_payload() -> dict[str, Any]:
    payload: dict[str, Any] = json.loads(sys.stdin.read())
    return payload


def run(parse: Parse, payload: dict[str, Any]) -> None:
    parsed: list[dict[str, Any]] = []
    for i, argv in enumerate(payload["launches"]):
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                parsed.append(parse(list(argv)))
        except (SystemExit, Exception) as exc:  # argparse exits; the engines' validators raise
            print(err.getvalue(), file=sys.stderr)
            print(json.dumps({"ok": False, "error": f"launch {i}: {refused(err.getvalue(), exc)}"}))
            return
    print(json.dumps({"ok": True, "result": {"parsed": parsed}}, default=str))
