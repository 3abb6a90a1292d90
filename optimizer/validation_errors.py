"""Turn pydantic's ValidationError into a DomainError that names the field and the rule."""

from __future__ import annotations

from pydantic import ValidationError

from optimizer.errors import DomainError


def domain_error_from_validation(exc: ValidationError, prefix: str) -> DomainError:
    """The first error of `exc` as a DomainError with a dotted field path under `prefix`."""
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err.get("loc", ()) if p != "__root__")
    ctx_error = (err.get("ctx") or {}).get("error")
    if isinstance(ctx_error, DomainError):
        return ctx_error
    field = f"{prefix}.{loc}" if loc else prefix
    value = err.get("input")
    shown = f" (got {value!r})" if isinstance(value, int | float | str) and len(repr(value)) < 40 else ""
    return DomainError(field, f"{err['msg']}{shown}")
