"""The plan page's Copy blocks: every export of the plan, each the bytes the API answers (service.plans.
StoredPlan.exports, Export.script()) [issue 53 §2]. An SLA fleet gives one block per replica group and tool (and the
front end of a disaggregated fleet), never the main replica alone."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from optimizer.errors import DomainError
from optimizer.exports.launch import Export
from optimizer.search.fleet_result import FleetPlan
from optimizer.spec.names import SCHEDULERS, TOOLS
from service.plans import fleet_of, stored_plan
from store.models import Plan


@dataclass(frozen=True)
class CopyBlock:
    """One Copy button and the `<pre>` it copies: `dom_id` is `export-TOOL` for a tool's one export and
    `export-TOOL-K` (K from 1) for the K-th of a fleet's."""

    dom_id: str
    title: str
    export: Export


def copy_blocks(s: Session, row: Plan, with_jobs: bool) -> tuple[list[CopyBlock], list[tuple[str, str]]]:
    """(the Copy blocks, the (tool, rule) pairs of tools that cannot run a knob of the plan). A training plan with
    a placement (`with_jobs`) also gets the schedulers' jobs; a tool of the other mode (a serving engine for a
    training plan, a framework for a serving one) is left out."""
    fleet, stored = fleet_of(row), stored_plan(s, row)
    blocks: list[CopyBlock] = []
    unavailable: list[tuple[str, str]] = []
    for tool in [*TOOLS, *(SCHEDULERS if with_jobs else ())]:
        try:
            exports = stored.exports(tool)
        except DomainError as exc:
            if exc.field.startswith("export.") or tool in SCHEDULERS:  # a knob the tool cannot run
                unavailable.append((tool, exc.rule))
            continue  # otherwise: a training plan has no serving export and the other way round
        blocks += _blocks(tool, exports, fleet)
    return blocks, unavailable


def _blocks(tool: str, exports: list[Export], fleet: FleetPlan | None) -> list[CopyBlock]:
    if len(exports) == 1:
        return [CopyBlock(f"export-{tool}", tool, exports[0])]
    titles = [_group_title(tool, fleet, k) for k in range(len(exports))]
    return [CopyBlock(f"export-{tool}-{k + 1}", t, e) for k, (t, e) in enumerate(zip(titles, exports, strict=True))]


def _group_title(tool: str, fleet: FleetPlan | None, k: int) -> str:
    """`sglang: 7 x replica, H100-SXM-80GB tp2` for the K-th replica group; the front end after the groups."""
    if fleet is None or k >= len(fleet.groups):
        return f"{tool}: front end"
    g = fleet.groups[k]
    s = g.shape
    shape = f"tp{s.tp}" + (f" pp{s.pp}" if s.pp > 1 else "") + (f" dp{s.dp}" if s.dp > 1 else "")
    shape += f" ep{s.ep}" if s.ep > 1 else ""
    return f"{tool}: {g.count} x {s.role}, {s.gpu} {shape} on pool {s.pool}"
