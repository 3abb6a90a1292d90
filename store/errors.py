"""Store errors: domain errors (field and rule), never a driver exception."""

from __future__ import annotations

from optimizer.errors import DomainError


class NotFoundError(DomainError):
    """No row with that id or name."""

    def __init__(self, kind: str, key: object, rule: str | None = None) -> None:
        super().__init__(kind, rule or f"no {kind} {key!r}")


class ConflictError(DomainError):
    """A unique key or a state rule clashes with what is stored."""
