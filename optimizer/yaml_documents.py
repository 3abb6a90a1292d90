"""YAML documents that must hold a mapping (inventories, model fields): one parser, one pair of errors."""

from __future__ import annotations

from typing import Any

import yaml

from optimizer.errors import DomainError


def yaml_mapping(text: str, field: str, source: str, holds: str) -> dict[str, Any]:
    """The mapping in `text`; otherwise a DomainError on `field` naming `source` (one line: YAML's first)."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise DomainError(field, f"{source} is not valid YAML: {str(exc).splitlines()[0]}") from None
    except RecursionError:
        raise DomainError(field, f"{source} is nested too deeply") from None
    except ValueError as exc:  # e.g. an integer above Python's 4,300-digit conversion limit
        raise DomainError(field, f"{source} holds a value that cannot be read: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise DomainError(field, f"{source} must hold a mapping {holds}")
    return data
