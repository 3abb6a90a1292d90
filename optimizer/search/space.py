"""The declared search space: which values each knob may take, after the user's pins."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_core import PydanticCustomError

from optimizer.errors import DomainError
from optimizer.spec.parallel_config import CP_COMMS, EP_DISPATCHES, RECOMPUTES, SCHEDULES, SHARD_SCOPES
from optimizer.spec.recompute_modules import RECOMPUTE_MODULES, normalise

INT_KNOBS = ("tp", "pp", "dp", "cp", "ep", "etp", "vp", "mbs", "zero", "offload_layers", "shard_group")
KNOBS = (
    *INT_KNOBS,
    "schedule",
    "sp",
    "recompute",
    "recompute_modules",
    "tp_comm_overlap",
    "ep_comm_overlap",
    "cp_comm",
    "ep_dispatch",
    "shard_scope",
)

# Default search domains (the "declared search space"); pins narrow them.
DEFAULT_MBS = (1, 2, 4, 8)
DEFAULT_VP = (1, 2, 3, 4, 6, 8)
MIN_TOKENS_PER_CP_RANK = 1024  # CP only for long sequences: at least 1k tokens per rank [NB hybrid-context-parallel]
MAX_PP = 128
# Megatron-LM runs GPipe-free 1F1B and interleaved 1F1B natively; zero-bubble and GPipe are searched when pinned
# or when `schedules` lists them.
DEFAULT_SCHEDULES: tuple[str, ...] = ("1f1b", "interleaved-1f1b")


class KnobPin(BaseModel):
    """One knob fixed (`values`) or bounded (`low`/`high`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    values: tuple[Any, ...] | None = None
    low: int | None = None
    high: int | None = None

    def allows(self, value: Any) -> bool:
        if self.values is not None and value not in self.values:
            return False
        if self.low is not None and value < self.low:
            return False
        return not (self.high is not None and value > self.high)


class SearchSpace(BaseModel):
    """What the planner may choose, and the user's constraints on it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    pins: dict[str, KnobPin] = Field(default_factory=dict, description="Fixed or bounded knobs.")
    max_gpus: int | None = Field(default=None, ge=1, description="GPU budget.")
    pools: tuple[str, ...] | None = Field(default=None, description="Pools the plan may use; None = all.")
    schedules: tuple[str, ...] = Field(
        default=DEFAULT_SCHEDULES, min_length=1, description="Pipeline schedules searched (names from SCHEDULES)."
    )

    @field_validator("schedules")
    @classmethod
    def _known_schedules(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        bad = [s for s in value if s not in SCHEDULES]
        if bad:  # an unknown name used to be searched as nothing at all
            raise PydanticCustomError(  # a custom error: its message without pydantic's "Value error, " prefix
                "unknown_schedule",
                "unknown schedule {name}; known: {known}",
                {"name": repr(bad[0][:40]), "known": ", ".join(SCHEDULES)},
            )
        return value

    def allows(self, knob: str, value: Any) -> bool:
        pin = self.pins.get(knob)
        return pin is None or pin.allows(value)

    def pinned_values(self, knob: str) -> tuple[Any, ...] | None:
        pin = self.pins.get(knob)
        return pin.values if pin is not None else None


_PIN_RE = re.compile(r"^\s*([a-z_]+)\s*(=|<=|>=)\s*([A-Za-z0-9_.,+-]+)\s*$")
_BOOL = {"true": True, "1": True, "yes": True, "on": True, "false": False, "0": False, "no": False, "off": False}


def _convert(knob: str, raw: str) -> Any:
    if knob in INT_KNOBS:
        zero_ok = knob in ("zero", "offload_layers")
        if not (raw.isascii() and raw.isdigit()) or len(raw) > 9 or int(raw) < (0 if zero_ok else 1):
            rule = "a non-negative integer" if zero_ok else "a positive integer"
            shown = raw if len(raw) <= 20 else f"{raw[:20]}... ({len(raw)} characters)"
            raise DomainError(f"pin.{knob}", f"must be {rule} below 10^9 (got {shown!r})")
        if knob == "zero" and int(raw) > 3:
            raise DomainError("pin.zero", f"must be a ZeRO stage 0-3 (got {raw})")
        return int(raw)
    if knob in ("sp", "tp_comm_overlap", "ep_comm_overlap"):
        if raw.lower() not in _BOOL:
            raise DomainError(f"pin.{knob}", f"must be true or false (got {raw!r})")
        return _BOOL[raw.lower()]
    if knob == "recompute_modules":  # one set per value, modules joined by '+': mla_up_proj+mlp
        mods = raw.split("+")
        bad = [m for m in mods if m not in RECOMPUTE_MODULES]
        if bad or not raw:
            raise DomainError(
                "pin.recompute_modules", f"modules joined by '+' from {', '.join(RECOMPUTE_MODULES)} (got {raw!r})"
            )
        return normalise(mods)
    choices = {"schedule": SCHEDULES, "cp_comm": CP_COMMS, "ep_dispatch": EP_DISPATCHES, "shard_scope": SHARD_SCOPES}
    allowed: tuple[str, ...] = choices.get(knob, RECOMPUTES)
    if raw not in allowed:
        raise DomainError(f"pin.{knob}", f"must be one of {', '.join(allowed)} (got {raw!r})")
    return raw


def parse_pins(texts: list[str]) -> dict[str, KnobPin]:
    """`tp=8`, `pp<=16`, `mbs=1,2`, `schedule=zb-h1`, `recompute=full`, `recompute_modules=mla_up_proj+mlp`,
    `sp=true` -> pins; errors name the pin."""
    pins: dict[str, dict[str, Any]] = {}
    for text in texts:
        m = _PIN_RE.match(text)
        if m is None:
            raise DomainError("pin", f"{text!r} is not KNOB=VALUE, KNOB<=N or KNOB>=N")
        knob, op, raw = m.groups()
        if knob not in KNOBS:
            raise DomainError("pin", f"unknown knob {knob!r}; knobs: {', '.join(KNOBS)}")
        entry = pins.setdefault(knob, {})
        if op == "=":
            values = tuple(_convert(knob, v) for v in raw.split(","))
            if entry.get("values") is not None:
                values = tuple(v for v in values if v in entry["values"])
            entry["values"] = values
        else:
            if knob not in INT_KNOBS:
                raise DomainError(f"pin.{knob}", f"{op} needs an integer knob")
            entry["low" if op == ">=" else "high"] = _convert(knob, raw)
    out = {k: KnobPin(**v) for k, v in pins.items()}
    for knob, pin in out.items():
        if pin.values is not None and not pin.values:
            raise DomainError(f"pin.{knob}", "pins for this knob contradict each other (no value left)")
        if pin.low is not None and pin.high is not None and pin.low > pin.high:
            raise DomainError(f"pin.{knob}", f"{knob}>={pin.low} contradicts {knob}<={pin.high}")
        if pin.values is not None and not any(pin.allows(v) for v in pin.values):
            raise DomainError(f"pin.{knob}", f"{knob}={pin.values} contradicts its bounds")
    return out
