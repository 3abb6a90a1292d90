"""Build workloads and parallel configs from loose inputs (CLI flags, API bodies) with field-named errors."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from optimizer.errors import DomainError
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.validation_errors import domain_error_from_validation
from optimizer.spec.workload import InferenceWorkload, TrainingWorkload


def build_training(**fields: Any) -> TrainingWorkload:
    """A TrainingWorkload; errors name `workload.<field>`."""
    try:
        return TrainingWorkload.model_validate({k: v for k, v in fields.items() if v is not None})
    except ValidationError as exc:
        raise domain_error_from_validation(exc, "workload") from None


def build_inference(**fields: Any) -> InferenceWorkload:
    """An InferenceWorkload; errors name `workload.<field>`."""
    try:
        return InferenceWorkload.model_validate({k: v for k, v in fields.items() if v is not None})
    except ValidationError as exc:
        raise domain_error_from_validation(exc, "workload") from None


def build_config(**fields: Any) -> ParallelConfig:
    """A ParallelConfig; errors name `config.<field>`."""
    try:
        return ParallelConfig.model_validate({k: v for k, v in fields.items() if v is not None})
    except ValidationError as exc:
        raise domain_error_from_validation(exc, "config") from None


def parse_int_list(text: str | None, field: str) -> list[int] | None:
    """'20,22,22,16' -> [20, 22, 22, 16]."""
    if text is None:
        return None
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise DomainError(field, f"must be comma-separated integers (got {text!r})") from None
