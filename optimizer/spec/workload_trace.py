"""The user's own requests: a trace of arrivals and token counts, read from the files the serving benchmarks write
[issue 55 §1].

One JSON object per line (JSONL), in any of these shapes (a file may mix none: each line is read by its own keys):

- Mooncake FAST'25 traces and aiperf's `mooncake_trace` (kvcache-ai/Mooncake FAST25-release/README.md and
  traces/conversation_trace.jsonl; ai-dynamo/aiperf docs/benchmark-modes/trace-replay.md): `timestamp` (arrival,
  milliseconds), `input_length`, `output_length`, optional `hash_ids` (the prompt's 512-token block hashes, equal ids
  = a shared prefix) and `session_id` (aiperf). aiperf's `messages` / `text_input` lines carry text, not a token
  count, and are refused.
- `vllm bench serve --save-result --save-detailed` (vllm-project/vllm vllm/benchmarks/serve.py 009e6d4a, the
  `result` dict): one object holding the lists `input_lens`, `output_lens`, optional `start_times` (each request's
  send time, time.perf_counter seconds) and `errors` (a failed request's message; those requests are left out).
- This project's own shape (what `workload_trace` holds once read): `arrival_s`, `input_tokens`, `output_tokens`,
  optional `session_id` and `prefix_blocks`.

Arrivals are made relative to the first one; a trace whose lines carry no time is a list of lengths (sent at a rate
or by N users). Bad input is a DomainError naming the line and the field.
"""

from __future__ import annotations

import json
import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from optimizer.errors import DomainError

MAX_TRACE_REQUESTS = 100_000
"""Most requests a trace may hold: the simulation runs every one (10,000 requests: 0.06 s to read and 0.4 s to
simulate on one core of the project's 2-core CI machine, measured 2026-12-02)."""

LengthDistribution = Literal[
    "sharegpt", "openchat-sharegpt4", "arxiv-summarization", "azure-conv-2023", "azure-code-2023", "random", "sonnet"
]
"""The named datasets of optimizer/costmodel/request_lengths.py (each with its source there)."""


class TraceRequest(BaseModel):
    """One request of a trace."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    arrival_s: float | None = Field(
        default=None, ge=0, description="Arrival after the trace's first request, seconds; None: untimed."
    )
    input_tokens: int = Field(ge=1, le=100_000_000, description="Prompt tokens.")
    output_tokens: int = Field(ge=1, le=100_000_000, description="Generated tokens.")
    session_id: str | None = Field(default=None, max_length=256, description="Conversation the request belongs to.")
    prefix_blocks: tuple[int, ...] = Field(
        default=(), max_length=1_000_000, description="The prompt's block hashes (Mooncake hash_ids): equal = shared."
    )


def parse_trace(text: str, source: str = "workload_trace") -> tuple[TraceRequest, ...]:
    """The requests of a JSONL trace (module docstring), in arrival order, arrivals relative to the first."""
    doc = _whole_document(text)
    lines = [doc] if doc is not None else [ln for ln in text.splitlines()]
    out: list[TraceRequest] = []
    for n, line in enumerate(lines, start=1):
        if isinstance(line, str):
            if not line.strip():
                continue
            obj = _json_line(line, f"{source} line {n}")
        else:
            obj = line
        out += _requests(obj, f"{source} line {n}")
        if len(out) > MAX_TRACE_REQUESTS:
            raise DomainError(source, f"at most {MAX_TRACE_REQUESTS} requests (line {n} passes it)")
    return normalized(out, source)


def normalized(requests: list[TraceRequest], source: str = "workload_trace") -> tuple[TraceRequest, ...]:
    """Requests in arrival order with the first at 0; every request timed or none."""
    if not requests:
        raise DomainError(source, "holds no request")
    timed = [r.arrival_s is not None for r in requests]
    if any(timed) and not all(timed):
        first = timed.index(not timed[0]) + 1
        raise DomainError(source, f"every request has an arrival time or none does (request {first} differs)")
    if not timed[0]:
        return tuple(requests)
    t0 = min(float(r.arrival_s or 0.0) for r in requests)
    ordered = sorted(requests, key=lambda r: float(r.arrival_s or 0.0))  # stable: ties keep the file's order
    return tuple(r.model_copy(update={"arrival_s": float(r.arrival_s or 0.0) - t0}) for r in ordered)


def _whole_document(text: str) -> Any:
    """A file that is one JSON object (a `vllm bench serve` result saved pretty-printed), else None."""
    stripped = text.strip()
    if not stripped.startswith("{") or "\n" not in stripped:
        return None
    try:
        return json.loads(stripped)
    except json.JSONDecodeError:
        return None


def _json_line(line: str, where: str) -> Any:
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise DomainError(where, f"is not JSON ({exc.msg} at column {exc.colno})") from None


def _requests(obj: Any, where: str) -> list[TraceRequest]:
    if not isinstance(obj, dict):
        raise DomainError(where, f"must be a JSON object (got {type(obj).__name__})")
    if "input_lens" in obj or "output_lens" in obj:
        return _vllm_result(obj, where)
    if "input_length" in obj or "output_length" in obj or "messages" in obj or "text_input" in obj:
        return [_mooncake(obj, where)]
    if "input_tokens" in obj or "output_tokens" in obj:
        return [_own(obj, where)]
    raise DomainError(
        where,
        "names no known field: Mooncake / aiperf (timestamp, input_length, output_length), vllm bench serve "
        "(input_lens, output_lens, start_times) or arrival_s, input_tokens, output_tokens",
    )


def _tokens(obj: dict[str, Any], key: str, where: str) -> int:
    v = obj.get(key)
    if isinstance(v, bool) or not isinstance(v, int | float) or v != v or int(v) != v:
        raise DomainError(f"{where}.{key}", f"must be a whole number of tokens (got {v!r})")
    if v < 1:
        raise DomainError(f"{where}.{key}", f"must be >= 1 token (got {v!r})")
    return int(v)


def _seconds(v: Any, field: str, scale: float) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise DomainError(field, f"must be a finite number (got {v!r})")
    if v < 0:
        raise DomainError(field, f"must be >= 0 (got {v!r})")
    return float(v) * scale


def _session(obj: dict[str, Any], key: str, where: str) -> str | None:
    v = obj.get(key)
    if v is None:
        return None
    if not isinstance(v, str | int) or isinstance(v, bool):
        raise DomainError(f"{where}.{key}", f"must be a string (got {v!r})")
    return str(v)


def _mooncake(obj: dict[str, Any], where: str) -> TraceRequest:
    if "input_length" not in obj:
        raise DomainError(
            f"{where}.input_length", "is needed: a messages / text_input line carries text, not a token count"
        )
    blocks = obj.get("hash_ids", [])
    if not isinstance(blocks, list) or not all(isinstance(b, int) and not isinstance(b, bool) for b in blocks):
        raise DomainError(f"{where}.hash_ids", "must be a list of integer block hashes")
    ts = obj.get("timestamp")
    return TraceRequest(
        arrival_s=None if ts is None else _seconds(ts, f"{where}.timestamp", 1e-3),  # milliseconds
        input_tokens=_tokens(obj, "input_length", where),
        output_tokens=_tokens(obj, "output_length", where),
        session_id=_session(obj, "session_id", where),
        prefix_blocks=tuple(blocks),
    )


def _own(obj: dict[str, Any], where: str) -> TraceRequest:
    unknown = set(obj) - set(TraceRequest.model_fields)
    if unknown:
        raise DomainError(f"{where}.{sorted(unknown)[0]}", "is not a field of a trace request")
    blocks = obj.get("prefix_blocks", [])
    if not isinstance(blocks, list | tuple) or not all(isinstance(b, int) and not isinstance(b, bool) for b in blocks):
        raise DomainError(f"{where}.prefix_blocks", "must be a list of integer block hashes")
    ts = obj.get("arrival_s")
    return TraceRequest(
        arrival_s=None if ts is None else _seconds(ts, f"{where}.arrival_s", 1.0),
        input_tokens=_tokens(obj, "input_tokens", where),
        output_tokens=_tokens(obj, "output_tokens", where),
        session_id=_session(obj, "session_id", where),
        prefix_blocks=tuple(blocks),
    )


def _vllm_result(obj: dict[str, Any], where: str) -> list[TraceRequest]:
    ins, outs = obj.get("input_lens"), obj.get("output_lens")
    if not isinstance(ins, list) or not isinstance(outs, list) or len(ins) != len(outs):
        raise DomainError(
            f"{where}.output_lens", "input_lens and output_lens must be lists of one length (--save-detailed)"
        )
    starts = obj.get("start_times")
    errors = obj.get("errors") or [""] * len(ins)
    for key, seq in (("start_times", starts), ("errors", errors)):
        if seq is not None and (not isinstance(seq, list) or len(seq) != len(ins)):
            raise DomainError(f"{where}.{key}", f"must be a list as long as input_lens ({len(ins)})")
    out: list[TraceRequest] = []
    for i, (p, o) in enumerate(zip(ins, outs, strict=True)):
        if errors[i]:
            continue  # a failed request: vllm bench serve leaves it out of every metric
        row = {"input_lens": p, "output_lens": o}
        out.append(
            TraceRequest(
                arrival_s=None if starts is None else _seconds(starts[i], f"{where}.start_times[{i}]", 1.0),
                input_tokens=_tokens(row, "input_lens", f"{where}[{i}]"),
                output_tokens=_tokens(row, "output_lens", f"{where}[{i}]"),
            )
        )
    return out
