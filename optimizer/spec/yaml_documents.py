"""Documents that must hold a mapping (inventories, model fields, config.json): one parser, one set of errors."""

from __future__ import annotations

import json
import os
import select
import stat
from pathlib import Path
from typing import Any, BinaryIO, Literal

import yaml

from optimizer.errors import DomainError


class DuplicateKey(ValueError):
    """A mapping names one key twice (YAML 1.2 §3.2.1.1: keys are unique; RFC 8259 §4: names SHOULD be unique):
    keeping the last value silently would hide the first."""

    def __init__(self, key: object, where: str) -> None:
        super().__init__(f"duplicate key {str(key)[:80]!r}{where}")
        self.key = key


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a mapping that names a key twice (it keeps the last one)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[object] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, str | int | float | bool) and key in seen:
                raise DuplicateKey(key, f" (line {key_node.start_mark.line + 1})")
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """json.loads' object_pairs_hook: a dict, refusing a name given twice."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKey(key, "")
        out[key] = value
    return out


def yaml_mapping(text: str, field: str, source: str, holds: str) -> dict[str, Any]:
    """The mapping in YAML `text`; otherwise a DomainError on `field` naming `source` (one line: YAML's first)."""
    return document_mapping(text, field, source, holds, "YAML")


def document_mapping(text: str, field: str, source: str, holds: str, fmt: Literal["YAML", "JSON"]) -> dict[str, Any]:
    """The mapping in `text` (YAML or JSON); otherwise a DomainError on `field` naming `source`: not valid, nested
    too deeply, a value Python will not read (an integer over 4,300 digits), or not a mapping."""
    try:
        data = json.loads(text, object_pairs_hook=unique_keys) if fmt == "JSON" else yaml.load(text, _UniqueKeyLoader)
    except DuplicateKey as exc:
        raise DomainError(field, f"{source} names a key twice: {exc}") from None
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


# A pipe (bash's `<(...)`, /dev/stdin fed by a pipe) or a character device is read once it has data or is closed;
# a FIFO that nothing writes to would block the command for ever: after this long it is an error [issue 37 item 3].
PIPE_WAIT_S = 5.0


def read_document(path: Path, field: str) -> str:
    """The UTF-8 text of `path` (a regular file, or a pipe whose writer starts within PIPE_WAIT_S); a DomainError on
    `field` when it cannot be read, is a directory or a device, is larger than MAX_DOCUMENT_BYTES, or is not
    UTF-8. Opened without blocking: a FIFO with no writer never hangs the command."""
    shown = shown_path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        raise DomainError(field, f"cannot read {shown}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise DomainError(field, f"{shown} is a directory, not a file")
        if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode):  # /dev/zero reads at once (to the cap); a tty may never
            if not select.select([fd], [], [], PIPE_WAIT_S)[0]:
                raise DomainError(field, f"{shown} is a pipe or device nothing wrote to within {PIPE_WAIT_S:g} s")
            os.set_blocking(fd, True)
        elif not stat.S_ISREG(mode):
            raise DomainError(field, f"{shown} is not a regular file (a socket or a block device)")
        with os.fdopen(os.dup(fd), "rb") as stream:
            data = stream.read(MAX_DOCUMENT_BYTES + 1)
    except OSError as exc:
        raise DomainError(field, f"cannot read {shown}: {exc.strerror}") from None
    finally:
        os.close(fd)
    return decode_document(data, field, shown)


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
