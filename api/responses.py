"""The error responses each route documents in the OpenAPI document."""

from __future__ import annotations

from typing import Any

from api.schemas import ErrorOut, ValidationErrorOut

_WHAT = {
    401: "No token, or an unknown or revoked one.",
    403: "The token lacks the scope.",
    404: "No such resource.",
    409: "Conflicts with what is stored (a name, an idempotency key, a state).",
    413: "Request body too large.",
    422: "Invalid input: the field path and the rule.",
    503: "The database or the job queue is unavailable.",
}


def codes(*statuses: int) -> dict[int | str, dict[str, Any]]:
    return {s: {"model": ValidationErrorOut if s == 422 else ErrorOut, "description": _WHAT[s]} for s in statuses}


# Every /v1 route: authentication, validation (path and query parameters too) and availability.
STANDARD = codes(401, 403, 422, 503)
NOT_FOUND = codes(404)
CONFLICT = codes(404, 409)
WRITE = codes(404, 409, 413)
