"""Turn pydantic's ValidationError into a DomainError that names the field and the rule."""

from __future__ import annotations

from pydantic import ValidationError

from optimizer.errors import DomainError


def _union_tag(part: object) -> bool:
    """pydantic's name for a union member in an error path (`int`, `list[Node]`)."""
    return isinstance(part, str) and ("[" in part or part in ("int", "str", "float", "bool"))


def domain_error_from_validation(exc: ValidationError, prefix: str) -> DomainError:
    """The first error of `exc` as a DomainError with a dotted field path under `prefix`."""
    errors = exc.errors()
    # A union (`nodes: int | list[Node]`) reports one error per member: the deepest path is the informative one.
    err = max(errors, key=lambda e: len(e.get("loc", ())))
    loc = ".".join(str(p) for p in err.get("loc", ()) if p != "__root__" and not _union_tag(p))
    ctx_error = (err.get("ctx") or {}).get("error")
    if isinstance(ctx_error, DomainError):
        return ctx_error
    field = f"{prefix}.{loc}" if loc else prefix
    value = err.get("input")
    shown = f" (got {value!r})" if isinstance(value, int | float | str) and len(repr(value)) < 40 else ""
    return DomainError(field, f"{err['msg']}{shown}")
