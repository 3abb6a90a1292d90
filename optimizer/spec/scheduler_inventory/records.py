"""What a scheduler says about its nodes, reduced to what an inventory holds, whichever scheduler said it."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from optimizer.errors import DomainError
from optimizer.spec.cluster_spec import NodeState
from optimizer.spec.gpu_catalog import BUILTIN_GPUS, GPUSpec, resolve_gpu


class SchedulerReportedError(DomainError):
    """The scheduler answered with an error of its own (sinfo --json exits 0 with `errors` when slurmctld cannot
    be reached): what it printed is not an inventory, and no revision may be built from it."""


class ScheduledNode(BaseModel):
    """One GPU node as the scheduler reports it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(description="The scheduler's node name.")
    gpu: str = Field(description="The GPU type, as the catalog (or the cluster's own GPU types) names it.")
    gpus: int = Field(ge=1, description="GPUs in the node.")
    state: NodeState = Field(description="healthy, drained or failed, from the scheduler's state and flags.")
    why: str = Field(default="", description="The scheduler's words for an unhealthy state (e.g. IDLE+DRAIN).")
    switches: list[str] = Field(default_factory=list, description="Network switches above the node, leaf first.")
    domain: str | None = Field(
        default=None, description="The multi-node group the scheduler puts the node in (Slurm block, NVLink clique)."
    )
    domain_source: str = Field(default="", description="Where `domain` was read (Slurm block, a label key).")


class SchedulerInventory(BaseModel):
    """A scheduler's GPU nodes, the names of all its nodes, and what was left out."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    source: str = Field(description="The scheduler and the shape read, e.g. 'Slurm sinfo --json (v0.0.38)'.")
    nodes: list[ScheduledNode] = Field(description="The GPU nodes.")
    ignored: dict[str, list[str]] = Field(
        default_factory=dict, description="Nodes left out, by reason (e.g. 'without GPUs')."
    )
    notes: list[str] = Field(default_factory=list, description="What the reader assumed or left out.")
    assumed: dict[str, str] = Field(
        default_factory=dict,
        description="Scheduler GPU names that leave the variant open (Slurm GRES `a100`), with the catalog GPU "
        "assumed for them (no mapping given, no memory size read on the node).",
    )


def known_gpu_names(custom: dict[str, GPUSpec] | None = None) -> str:
    """The GPU types an unknown one is listed against."""
    return ", ".join(sorted({*BUILTIN_GPUS, *(custom or {})}))


def resolve_scheduler_gpu(
    candidates: list[str], custom: dict[str, GPUSpec] | None, field: str, read: str
) -> GPUSpec | None:
    """The one GPU type the candidate names resolve to (None when no candidate does). Several different types
    among the candidates (features `h100,a100`) are an error naming what was read."""
    found: dict[str, GPUSpec] = {}
    for name in candidates:
        try:
            gpu = resolve_gpu(name, custom)
        except DomainError:
            continue
        found[gpu.name] = gpu
    if len(found) > 1:
        raise DomainError(field, f"{read} names several GPU types ({', '.join(sorted(found))}); a node holds one")
    return next(iter(found.values()), None)


def unknown_gpu(field: str, read: str, custom: dict[str, GPUSpec] | None) -> DomainError:
    """The error for a GPU type no catalog name matches: what was read and the known names."""
    return DomainError(field, f"unknown GPU type in {read}; known: {known_gpu_names(custom)}")


def as_object(value: Any) -> dict[str, Any]:
    """`value` when it is a JSON object, else an empty one (a field a scheduler version leaves out or nulls)."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    """`value` when it is a JSON array, else an empty one."""
    return value if isinstance(value, list) else []
