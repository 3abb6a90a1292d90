"""Reading PyTorch profiler (Kineto) Chrome-trace files: one JSON document per rank, plain or gzipped, alone, in a
directory or in a tar archive [issue 54 §2]. Standard library only.

A trace is a JSON object with `traceEvents` (a list of events) [Chrome Trace Event Format; kineto
libkineto/src/output_json.cpp writes `{"schemaVersion", "deviceProperties", "distributedInfo", "traceEvents"}`]; a
bare list of events is accepted too (the format allows it). The rank is `distributedInfo.rank` [kineto
output_json.cpp, from torch.distributed], else a `rank<N>` in the file name (HTA's test traces `rank-3.json.gz`),
else the file's position.
"""

from __future__ import annotations

import gzip
import io
import json
import re
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from optimizer.errors import DomainError

# A trace of a step or two of a large model is tens to hundreds of MB of JSON; beyond this, profile fewer steps.
MAX_TRACE_BYTES = 2 * 1024**3
MAX_RANKS = 4096
GZIP_MAGIC = b"\x1f\x8b"
TRACE_SUFFIXES = (".json", ".json.gz")
_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)


@dataclass(frozen=True)
class TraceFile:
    """One rank's trace: its name, its rank and its events."""

    name: str
    rank: int
    events: list[dict[str, Any]]
    device: str | None


def _gunzip(data: bytes, name: str) -> bytes:
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as f:
            out = f.read(MAX_TRACE_BYTES + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise DomainError("trace", f"{name}: unreadable gzip ({exc})") from None
    if len(out) > MAX_TRACE_BYTES:
        raise DomainError("trace", f"{name}: more than {MAX_TRACE_BYTES:,} bytes uncompressed; profile fewer steps")
    return out


def _document(data: bytes, name: str) -> Any:
    if data[:2] == GZIP_MAGIC:
        data = _gunzip(data, name)
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise DomainError("trace", f"{name}: not a Chrome-trace JSON document ({exc})") from None


def parse_trace_bytes(data: bytes, name: str, position: int = 0) -> TraceFile:
    """One rank's trace from its bytes (JSON, or gzipped JSON)."""
    doc = _document(data, name)
    meta: dict[str, Any] = {}
    if isinstance(doc, dict):
        events, meta = doc.get("traceEvents"), doc
    else:
        events = doc
    if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
        raise DomainError("trace", f"{name}: not a trace: a Chrome trace has a 'traceEvents' list of event objects")
    return TraceFile(name, _rank(meta, name, position), events, _device(meta))


def _rank(meta: dict[str, Any], name: str, position: int) -> int:
    info = meta.get("distributedInfo")
    rank = info.get("rank") if isinstance(info, dict) else None
    if isinstance(rank, int) and not isinstance(rank, bool) and rank >= 0:
        return rank
    m = _RANK_IN_NAME.search(Path(name).name)
    return int(m.group(1)) if m else position


def _device(meta: dict[str, Any]) -> str | None:
    props = meta.get("deviceProperties")
    if isinstance(props, list) and props and isinstance(props[0], dict):
        dev = props[0].get("name")
        return str(dev) if dev else None
    return None


def is_trace_name(name: str) -> bool:
    return name.endswith(TRACE_SUFFIXES)


def _unique_ranks(files: list[TraceFile]) -> list[TraceFile]:
    if not files:
        raise DomainError("trace", f"no trace files ({', '.join(TRACE_SUFFIXES)})")
    if len(files) > MAX_RANKS:
        raise DomainError("trace", f"at most {MAX_RANKS} rank traces")
    seen: dict[int, str] = {}
    for f in files:
        if f.rank in seen:
            raise DomainError("trace", f"{f.name} and {seen[f.rank]} both say rank {f.rank}: one trace per rank")
        seen[f.rank] = f.name
    return sorted(files, key=lambda f: f.rank)


def read_trace_path(path: Path) -> list[TraceFile]:
    """The rank traces of a file or a directory (its *.json and *.json.gz files, not recursing)."""
    if path.is_dir():
        names = sorted(p for p in path.iterdir() if p.is_file() and is_trace_name(p.name))
        files = [parse_trace_bytes(_read(p), p.name, i) for i, p in enumerate(names)]
    elif path.is_file():
        files = [parse_trace_bytes(_read(path), path.name)]
    else:
        raise DomainError("trace", f"{path}: no such file or directory")
    return _unique_ranks(files)


def _read(path: Path) -> bytes:
    if path.stat().st_size > MAX_TRACE_BYTES:
        raise DomainError("trace", f"{path.name}: more than {MAX_TRACE_BYTES:,} bytes")
    return path.read_bytes()


def _is_tar(data: bytes) -> bool:
    return len(data) > 262 and data[257:262] == b"ustar"  # POSIX tar header magic at offset 257


def read_trace_upload(data: bytes) -> list[TraceFile]:
    """The rank traces of an uploaded body: one trace (JSON or gzipped JSON), or a tar archive (plain or gzipped)
    of trace files, one per rank (what `meshplan measure --trace DIR` sends)."""
    if not data:
        raise DomainError("trace", "empty body: send a trace file or a tar of trace files")
    inner = _gunzip(data, "body") if data[:2] == GZIP_MAGIC else data
    if not _is_tar(inner):
        return [parse_trace_bytes(inner, "body")]
    files = []
    with tarfile.open(fileobj=io.BytesIO(inner)) as tar:
        members = sorted((m for m in tar.getmembers() if m.isfile() and is_trace_name(m.name)), key=lambda m: m.name)
        for i, member in enumerate(members):
            handle = tar.extractfile(member)
            if handle is not None:
                files.append(parse_trace_bytes(handle.read(), Path(member.name).name, i))
    return _unique_ranks(files)
