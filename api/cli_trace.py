"""`meshplan measure PLAN --trace PATH`: a profiler trace (a file, or a directory of one per rank) sent to the service
as it is, a directory packed into one tar (POST /v1/plans/{id}/measurements/trace reads either) [issue 54 §2]."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from optimizer.errors import DomainError

# What the service reads in a directory's tar (optimizer/calibration/trace_files.py TRACE_SUFFIXES).
TRACE_SUFFIXES = (".json", ".json.gz")


def trace_body(path: Path) -> bytes:
    """The upload: a trace file's bytes, or a tar of a directory's trace files; a path that cannot be read (too
    long, unreadable, not there) is a DomainError naming --trace, never a traceback."""
    shown = str(path) if len(str(path)) <= 80 else str(path)[:77] + "..."
    try:
        if path.is_file():
            return path.read_bytes()
        if not path.is_dir():
            raise DomainError("--trace", f"{shown}: no such file or directory")
        files = sorted(p for p in path.iterdir() if p.is_file() and p.name.endswith(TRACE_SUFFIXES))
        if not files:
            raise DomainError("--trace", f"{shown}: no trace files ({', '.join(TRACE_SUFFIXES)}) in the directory")
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for p in files:
                tar.add(p, arcname=p.name)
        return buf.getvalue()
    except (OSError, ValueError) as exc:  # ENAMETOOLONG, EACCES, a NUL byte in the path
        raise DomainError("--trace", f"cannot read {shown}: {getattr(exc, 'strerror', None) or exc}") from None


def print_phases(out: dict[str, Any]) -> None:
    """The traced step's phases, seconds per step (median over ranks), beside the plan's estimate where it prices
    the phase."""
    phases = (out.get("measurement") or {}).get("phases_s") or {}
    if not phases:
        return
    priced = out.get("priced_phases_s") or {}
    ranks = len((out.get("breakdown") or {}).get("ranks") or [])
    t = Table(title=f"Traced step, {ranks} rank(s): seconds per step")
    for col in ("phase", "traced s", "priced s"):
        t.add_column(col, justify="left" if col == "phase" else "right")
    for name, v in phases.items():
        p = priced.get(name)
        t.add_row(name, f"{v:.4g}", f"{p:.4g}" if p is not None else "")
    Console().print(t)
