"""Documents that must hold a mapping (inventories, model fields, config.json): one parser, one set of errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

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


def read_document(path: Path, field: str) -> str:
    """The UTF-8 text of `path`; a DomainError on `field` when it cannot be read or is not UTF-8."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise DomainError(field, f"cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise DomainError(field, f"{path} is not UTF-8 text (byte {exc.start})") from None
