"""Where a cluster's inventory is read from: the live scheduler a sync asks (stored on the cluster)."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from optimizer.spec.scheduler_inventory.inventory_document import ImportDefaults
from optimizer.spec.scheduler_inventory.kubernetes import KubernetesLabels

# Paths and names end up as arguments of sinfo/scontrol/kubectl (never through a shell): absolute paths and the
# characters of kubeconfig context names and label selectors, nothing else. The Slurm files a sync reads on the
# server are configuration files (`.conf`): an error quoting a line of another file would show it to the client.
PATH_PATTERN = r"^/[A-Za-z0-9._/+@-]{0,1000}$"
CONF_PATTERN = r"^/[A-Za-z0-9._/+@-]{0,1000}\.conf$"


class SlurmSource(BaseModel):
    """A Slurm cluster read with `sinfo --json` and `scontrol show topology` on the host that syncs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["slurm"] = Field(default="slurm", description="slurm.")
    slurm_conf: str | None = Field(
        default=None, description="SLURM_CONF for the commands (absolute path of a .conf); None: Slurm's own."
    )
    topology_file: str | None = Field(
        default=None,
        description="A topology.conf to read (absolute path); None: what `scontrol show topology` prints.",
    )
    defaults: ImportDefaults = Field(default_factory=ImportDefaults, description="NICs of pools new to the cluster.")

    @field_validator("slurm_conf", "topology_file")
    @classmethod
    def _conf_file(cls, value: str | None) -> str | None:
        if value is not None and re.fullmatch(CONF_PATTERN, value) is None:
            raise ValueError("must be the absolute path of a .conf file (letters, digits, ._/+@-)")
        return value


class KubernetesSource(BaseModel):
    """A Kubernetes cluster read with `kubectl get nodes -o json` on the host that syncs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["k8s"] = Field(default="k8s", description="k8s.")
    context: str | None = Field(
        default=None, pattern=r"^[A-Za-z0-9._@:/-]{1,253}$", description="kubeconfig context; None: the current one."
    )
    kubeconfig: str | None = Field(default=None, description="kubeconfig path (absolute); None: kubectl's.")
    selector: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9._/=,!()-]{1,500}$",
        description="Label selector of the nodes to read (kubectl -l); None: every node.",
    )
    labels: KubernetesLabels = Field(default_factory=KubernetesLabels, description="Topology label keys.")
    defaults: ImportDefaults = Field(default_factory=ImportDefaults, description="NICs of pools new to the cluster.")

    @field_validator("kubeconfig")
    @classmethod
    def _path(cls, value: str | None) -> str | None:
        if value is not None and re.fullmatch(PATH_PATTERN, value) is None:
            raise ValueError("must be an absolute path (letters, digits, ._/+@-)")
        return value


SyncSource = Annotated[SlurmSource | KubernetesSource, Field(discriminator="kind")]
