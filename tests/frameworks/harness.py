"""Runs a framework's own code on an export: `check(name, payload)` sends the payload to `tests/frameworks/<name>/
check.py` under that framework's pinned environment (`.frameworks/<name>`, built by `make frameworks`) and returns
what it printed.

A missing environment fails the test under CI=true (make test builds them) and skips it elsewhere with the command
that builds it: never silently."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
LINKS = HERE.parent.parent / ".frameworks"


class Rejected(Exception):
    """The framework's own code refused the export; the message is what it said."""


def python(name: str) -> Path:
    exe = LINKS / name / "bin" / "python"
    if not exe.exists():
        why = f"the pinned {name} environment is not built (.frameworks/{name}): run `make frameworks`"
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
    return exe


def source(name: str) -> Path:
    """The pinned source snapshot unpacked beside the environment (source.txt), if any."""
    return LINKS / name / "src"


def check(name: str, payload: dict[str, Any], timeout: float = 300) -> dict[str, Any]:
    """What `name`'s own code made of `payload` (a JSON object the folder's check.py defines). Raises Rejected with
    the framework's message when it refused the export."""
    exe = python(name)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["PYTHONPATH"] = str(source(name))
    env["CUDA_VISIBLE_DEVICES"] = ""
    done = subprocess.run(
        [str(exe), str(HERE / name / "check.py")],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=HERE / name,
    )
    if done.returncode != 0:
        raise AssertionError(f"{name}/check.py failed ({done.returncode}):\n{done.stderr[-4000:]}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    if not out.get("ok"):
        raise Rejected(str(out.get("error")))
    result: dict[str, Any] = out["result"]
    return result
