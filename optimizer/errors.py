"""Domain errors: every invalid input names the field it concerns and the rule it breaks."""

from __future__ import annotations

from collections.abc import Iterable


class DomainError(ValueError):
    """An input that breaks a rule of the domain.

    `field` is the dotted path of the offending field (``config.tp``), `rule` the rule in words.
    """

    def __init__(self, field: str, rule: str) -> None:
        self.field = field
        self.rule = rule
        super().__init__(f"{field}: {rule}")


class UnknownNameError(DomainError):
    """A name (GPU type, preset, pool) that is not known; the message lists the known names."""

    def __init__(self, field: str, name: str, known: Iterable[str]) -> None:
        self.known = sorted(known)
        super().__init__(field, f"unknown {field.split('.')[-1]} {name!r}; known: {', '.join(self.known)}")
