"""What `meshplan plan` builds from its options and exports: the search space they declare, the plan's exports (a
launch, an SLA fleet's commands, a scheduler's job on the placement) and how they are written or printed. The
optimizer is imported inside the functions (start-up, issue 49)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import typer

from api.cli_output import err, fail, out
from optimizer.errors import DomainError

if TYPE_CHECKING:
    from optimizer.exports.launch import Export
    from optimizer.search.result import PlanResult
    from optimizer.search.space import SearchSpace
    from optimizer.spec.cluster_spec import ClusterSpec
    from optimizer.spec.model_spec import ModelSpec
    from optimizer.spec.workload import InferenceWorkload, TrainingWorkload


def plan_space(pin: list[str] | None, max_gpus: int | None, pools: str | None, schedules: str | None) -> SearchSpace:
    """The search space the options declare (pins, GPU budget, allowed pools and schedules)."""
    from optimizer.search.space import SearchSpace, parse_pins

    space_fields: dict[str, object] = {"pins": parse_pins(pin or []), "max_gpus": max_gpus}
    if pools:
        space_fields["pools"] = tuple(pools.split(","))
    if schedules:
        space_fields["schedules"] = tuple(schedules.split(","))
    return SearchSpace.model_validate(space_fields)


def plan_exports(
    export_to: str,
    result: PlanResult,
    spec: ModelSpec,
    clus: ClusterSpec,
    work: TrainingWorkload | InferenceWorkload,
    model_arg: str,
    model_id: str | None,
) -> list[Export]:
    """A plan's exports, by the function every path uses (optimizer/exports/plan_exports.py): a scheduler's job on
    its placement, an SLA fleet's commands, or the plan's launch."""
    from optimizer.exports.plan_exports import plan_exports as exports_of
    from optimizer.spec.model_ids import loadable_model

    if result.plan is None:
        return []
    try:
        ref, no_weights = loadable_model(model_arg, model_id)
        return exports_of(export_to, result, spec, clus, work, model_ref=ref, model_note=no_weights)
    except DomainError as exc:
        fail(exc)


def check_output(output: str | None, export_to: str | None, as_json: bool) -> None:
    """--output writes an export: it needs --export, and '-' (the export on stdout) leaves no room for --json."""
    if output is None:
        return
    if export_to is None:
        fail(DomainError("--output", "writes the export's bytes: give --export too (slurm, k8s, megatron, ...)"))
    if output == "-" and as_json:
        fail(
            DomainError(
                "--output",
                "'-' prints the bare export on stdout, where --json prints its object: give a "
                "file name, or drop --json",
            )
        )


def write_export(output: str, exports: list[Export], export_to: str) -> None:
    """Exactly the export's bytes (Export.script()) to `output` ('-': stdout). No plan, or a fleet of several
    exports, writes nothing and says why (exit 1 and 2)."""
    if not exports:
        err.print(f"error: --output: no plan was found, so no {export_to} export was written", markup=False)
        raise typer.Exit(1)
    if len(exports) > 1:
        fail(
            DomainError(
                "--output",
                f"the plan's fleet has {len(exports)} {export_to} exports (one per replica "
                "group) and --output takes one: use --json (its `exports` list)",
            )
        )
    data = exports[0].script()
    if output == "-":
        sys.stdout.write(data)
        sys.stdout.flush()
        return
    try:
        with open(output, "w", encoding="utf-8", newline="") as f:  # newline="": the bytes as they are
            f.write(data)
    except OSError as exc:
        fail(DomainError("--output", f"cannot write {output}: {exc.strerror or exc}"))
    err.print(f"wrote the {exports[0].tool} export to {output} ({len(data.encode())} bytes)", markup=False)


def print_notes(e: Export) -> None:
    """An export's notes, under its tool's name (its bytes went to --output)."""
    if e.notes:
        out.print(f"[bold]{e.tool}[/bold] notes:")
    for note in e.notes:
        out.print(f"  note: {note}", markup=False, highlight=False, soft_wrap=True)


def print_export(e: Export) -> None:
    """The tool's name, then the export's own bytes (Export.script()), then its notes, unwrapped."""
    out.print(f"[bold]{e.tool}[/bold]:")
    # Raw bytes, not the console: rich wraps at its width and rewrites text (emoji codes, tabs, control codes).
    sys.stdout.write(e.script())
    sys.stdout.flush()
    for note in e.notes:
        out.print(f"  note: {note}", markup=False, highlight=False, soft_wrap=True)
