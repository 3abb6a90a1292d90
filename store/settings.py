"""Service settings, read once from the environment (the names docker-compose.yml sets)."""

from __future__ import annotations

import os
import re
from functools import lru_cache
from typing import Literal
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, Field, ValidationError, field_validator

from optimizer.errors import DomainError

DEFAULT_DATABASE_URL = "sqlite:///./meshplan.db"


class Settings(BaseModel):
    """Every knob of the service. Environment variable: MESHPLAN_<FIELD> upper-cased, except the two URLs."""

    database_url: str = Field(default=DEFAULT_DATABASE_URL, description="DATABASE_URL: SQLAlchemy URL.")
    redis_url: str | None = Field(
        default=None, description="REDIS_URL: Celery broker and result backend; unset = jobs run in the API process."
    )
    max_time_limit_s: float = Field(default=600.0, gt=0.1, description="Cap on a job's solver time limit, seconds.")
    default_time_limit_s: float = Field(default=30.0, gt=0.1, description="Solver time limit when a job names none.")
    open_reads: bool = Field(default=False, description="Reads need no token.")
    max_body_bytes: int = Field(default=1_000_000, ge=1024, description="Largest request body, bytes.")
    max_trace_bytes: int = Field(
        default=256_000_000,
        ge=1024,
        description="Largest profiler-trace upload (POST /v1/plans/{id}/measurements/trace), bytes: a gzipped Kineto "
        "trace of a step or two is tens of MB per rank.",
    )
    max_page_size: int = Field(default=100, ge=1, description="Largest page of a list.")
    max_concurrent_requests: int = Field(
        default=16,
        ge=1,
        le=30,
        description="Requests served at once (more wait their turn without a thread or a database connection); at "
        "most the connection pool's 30.",
    )
    read_cache_mb: int = Field(
        default=64,
        ge=0,
        le=4096,
        description="Memory for finished plan-history and plan responses, MB per API process (0: none); a copy is "
        "served only while no commit has changed what it was built from (store.changes).",
    )
    replan_at: str = Field(default="02:00", description="Nightly re-plan time, HH:MM (00:00 to 23:59).")
    replan_timezone: str = Field(default="UTC", description="Time zone of replan_at (IANA name).")
    replan_calibration_change: float = Field(
        default=0.03,
        ge=0.0,
        le=10.0,
        description="Re-plan a watch when a calibration constant of its cluster moved by more than this (relative).",
    )
    replan_on_inventory_change: bool = Field(
        default=False, description="Re-plan a cluster's watches as soon as a node fails, drains or is restored."
    )
    sync_interval_s: float = Field(
        default=0.0,
        ge=0,
        description="Beat syncs the clusters' scheduler inventories this often, seconds (0: only before the nightly "
        "re-plan).",
    )
    visibility_timeout_s: float = Field(
        default=900.0, gt=0, description="Redis redelivers a task whose worker died after this many seconds."
    )
    sweep_interval_s: float = Field(default=60.0, gt=0, description="How often beat re-sends lost jobs, seconds.")
    sweep_after_s: float = Field(default=120.0, gt=0, description="A job queued this long is sent again.")
    beat_schedule: str = Field(
        default="/tmp/meshplan-beat-schedule", description="File where Celery beat keeps its last run times."
    )
    job_progress_interval_s: float = Field(default=1.0, gt=0, description="Job progress written at most this often.")
    embedded_jobs: Literal["process", "thread"] = Field(
        default="process",
        description="Embedded mode (no REDIS_URL): jobs run in a child process, so a solve never holds the API's "
        "interpreter (process), or on a thread of the API process (thread: an in-memory SQLite database needs it).",
    )

    sync_file_dirs: str = Field(
        default="",
        description="Directories whose files a cluster's sync source may name (slurm_conf, topology_file, kubeconfig), "
        "absolute paths separated by ':'; empty (the default): a sync source may name no file, the schedulers' own "
        "defaults are used.",
    )

    @field_validator("sync_file_dirs")
    @classmethod
    def _absolute_dirs(cls, value: str) -> str:
        for part in (p for p in value.split(":") if p):
            if not part.startswith("/"):
                raise ValueError(f"must be absolute directories separated by ':' (got {part[:80]!r})")
        return value

    def readable_dirs(self) -> list[str]:
        """The directories a sync source's files must lie in, resolved (symbolic links followed)."""
        return [os.path.realpath(p) for p in self.sync_file_dirs.split(":") if p]

    @field_validator("replan_at")
    @classmethod
    def _clock_time(cls, value: str) -> str:
        match = re.fullmatch(r"(\d{2}):(\d{2})", value)
        if match is None or int(match[1]) > 23 or int(match[2]) > 59:
            raise ValueError(f"must be a time of day HH:MM from 00:00 to 23:59 (got {value[:40]!r})")
        return value

    @field_validator("replan_timezone")
    @classmethod
    def _time_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"must be an IANA time zone such as UTC or Europe/Berlin (got {value[:80]!r})") from None
        return value

    @field_validator("redis_url")
    @classmethod
    def _redis_url(cls, value: str | None) -> str | None:
        if value is None:
            return value
        shown = re.sub(r"//([^:/@]*):[^@/]*@", r"//\1:***@", value)[:80]  # never echo a password
        rule = f"must be a redis://, rediss:// or redis+socket:// URL (got {shown!r})"
        if not re.fullmatch(r"(rediss?|redis\+socket)://[^\s]*", value):
            raise ValueError(rule)
        try:
            urlsplit(value).port  # noqa: B018 - a port that is not a number (or above 65535) raises
        except ValueError:
            raise ValueError(f"{rule}: its port is not a number from 0 to 65535") from None
        return value

    def time_limit(self, requested: float | None) -> float:
        """A job's solver time limit: the one asked for, else the default (never above the cap)."""
        return min(requested if requested is not None else self.default_time_limit_s, self.max_time_limit_s)


ENV = {
    "database_url": "DATABASE_URL",
    "redis_url": "REDIS_URL",
}


def env_name(field: str) -> str:
    """The environment variable that sets `field`."""
    return ENV.get(field, f"MESHPLAN_{field.upper()}")


def load_settings(environ: dict[str, str] | None = None) -> Settings:
    """Settings from the environment; a bad value is a domain error naming the variable."""
    env = os.environ if environ is None else environ
    raw: dict[str, object] = {}
    for field in Settings.model_fields:
        value = env.get(env_name(field))
        if value is not None and value != "":
            raw[field] = (
                value.lower() in ("1", "true", "yes", "on") if field.startswith(("open_", "replan_on")) else value
            )
    try:
        return Settings.model_validate(raw)
    except ValidationError as exc:  # one line naming the environment variable and its rule
        first = exc.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else "settings"
        rule = str(first["msg"]).removeprefix("Value error, ")
        raise DomainError(env_name(field) if field in Settings.model_fields else "settings", rule) from None


@lru_cache(maxsize=1)
def settings() -> Settings:
    """The process's settings (read once)."""
    return load_settings()
