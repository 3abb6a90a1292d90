"""Documents that must hold a mapping (inventories, model fields, config.json): one parser, one set of errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, BinaryIO, Literal

import yaml

from optimizer.errors import DomainError


def yaml_mapping(text: str, field: str, source: str, holds: str) -> dict[str, Any]:
    """The mapping in YAML `text`; otherwise a DomainError on `field` naming `source` (one line: YAML's first)."""
    return document_mapping(text, field, source, holds, "YAML")


def document_mapping(text: str, field: str, source: str, holds: str, fmt: Literal["YAML", "JSON"]) -> dict[str, Any]:
    """The mapping in `text` (YAML or JSON); otherwise a DomainError on `field` naming `source`: not valid, nested
    too deeply, a value Python will not read (an integer over 4,300 digits), or not a mapping."""
    try:
        data = json.loads(text) if fmt == "JSON" else yaml.safe_load(text)
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        raise DomainError(field, f"{source} is not valid {fmt}: {str(exc).splitlines()[0]}") from None
    except RecursionError:
        raise DomainError(field, f"{source} is nested too deeply") from None
    except ValueError as exc:  # e.g. an integer above Python's 4,300-digit conversion limit
        raise DomainError(field, f"{source} holds a value that cannot be read: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise DomainError(field, f"{source} must hold a mapping {holds}")
    return data


# The largest file any command reads (model configs and inventories are kilobytes; run logs a few megabytes): a
# cap so that `--model /dev/zero` or a mistaken binary ends in an error rather than reading until memory runs out.
MAX_DOCUMENT_BYTES = 64 * 2**20


def read_document(path: Path, field: str) -> str:
    """The UTF-8 text of `path`; a DomainError on `field` when it cannot be read, is larger than
    MAX_DOCUMENT_BYTES, or is not UTF-8."""
    try:
        with path.open("rb") as stream:
            data = stream.read(MAX_DOCUMENT_BYTES + 1)
    except OSError as exc:
        raise DomainError(field, f"cannot read {shown_path(path)}: {exc.strerror}") from None
    return decode_document(data, field, shown_path(path))


def read_stream(stream: BinaryIO, field: str, source: str = "stdin") -> str:
    """The UTF-8 text of a byte stream (stdin), with read_document's cap and errors."""
    return decode_document(stream.read(MAX_DOCUMENT_BYTES + 1), field, source)


def decode_document(data: bytes, field: str, source: str) -> str:
    """`data` as text with universal newlines (as `Path.read_text` reads it); a DomainError on `field` when it is
    larger than MAX_DOCUMENT_BYTES or not UTF-8."""
    if len(data) > MAX_DOCUMENT_BYTES:
        raise DomainError(field, f"{source} is larger than {MAX_DOCUMENT_BYTES // 2**20} MiB")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DomainError(field, f"{source} is not UTF-8 text (byte {exc.start})") from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def shown_path(path: Path | str, limit: int = 200) -> str:
    """A path as an error message shows it: cut after `limit` characters."""
    text = str(path)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"
