"""A training plan's placement: the hosts in rank order, the ranks on each, and where it falls short of the
fabric the cost model idealises."""

from __future__ import annotations

from pydantic import BaseModel, Field


class PlacedHost(BaseModel):
    """One host of the placement."""

    name: str = Field(description="Host name (the inventory's node).")
    pool: str = Field(description="Its pool.")
    leaf: str = Field(
        description="The leaf switch above it (the inventory's switches[0]; '<pool>/pod-<k>' from pod_size when the "
        "inventory does not say; the pool's name when it has one non-blocking tier)."
    )
    nvlink_domain: str = Field(
        description="Its NVLink domain (the inventory's nvlink_domain; '<pool>/nvl-<k>' for domains of several "
        "nodes the inventory does not name; else the host itself)."
    )
    first_rank: int = Field(description="The global rank on its local GPU 0.")
    ranks: int = Field(description="Ranks it runs: first_rank .. first_rank + ranks - 1 on local GPUs 0 .. ranks - 1.")
    stages: list[int] = Field(description="The pipeline stages its ranks belong to.")


class PipelineHop(BaseModel):
    """The sends between two consecutive pipeline stages."""

    stage: int = Field(description="The sending stage.")
    next_stage: int = Field(
        description="The receiving stage: stage + 1, or the first stage for the last one's sends to the next model "
        "chunk under interleaving."
    )
    same_leaf: bool = Field(description="Every pair of neighbouring ranks is under one leaf switch.")
    tier: str = Field(
        description="The outermost fabric level a pair of neighbours crosses: nvlink, pcie, network (within a "
        "leaf), inter-pod (across the spine), or pools (to another pool)."
    )
    leaves: list[str] = Field(description="The leaf switches the two stages' hosts are under.")


class Placement(BaseModel):
    """Which host runs which ranks (Megatron rank order: tp fastest, then cp, dp, pp; the expert groups etp, ep,
    edp inside each stage), and what the price had to give up."""

    world_size: int = Field(description="Ranks (GPUs) of the plan.")
    tp: int = Field(description="Tensor-parallel degree (TP group g holds ranks g*tp .. g*tp + tp - 1).")
    gpus_per_stage: int = Field(description="Ranks per pipeline stage (stage s holds ranks s*n .. s*n + n - 1).")
    hosts: list[PlacedHost] = Field(description="The hosts in node-rank order (torchrun --node-rank).")
    tp_domains: list[str] = Field(
        description="Per TP group, the NVLink domain its ranks lie in ('a + b' for a group split across domains)."
    )
    hops: list[PipelineHop] = Field(default_factory=list, description="Per stage boundary, where its sends go.")
    degraded: list[str] = Field(
        default_factory=list,
        description="Where the placement cannot give what the cost model idealises (a TP group split across "
        "NVLink domains, a stage's DP groups over more leaf switches, pipeline neighbours across the spine); the "
        "plan's estimate prices what the placement gives there.",
    )
    idle_gpus: int = Field(default=0, description="GPUs of the chosen hosts that run no rank.")

    def rank_hosts(self) -> list[tuple[str, int]]:
        """Per global rank, its host and local GPU index."""
        out: list[tuple[str, int]] = [("", 0)] * self.world_size
        for h in self.hosts:
            for local in range(h.ranks):
                out[h.first_rank + local] = (h.name, local)
        return out

    def uniform(self) -> int | None:
        """The ranks per host when every host runs the same number of consecutive ranks in node-rank order (as
        torchrun numbers them: node_rank x nproc_per_node + local_rank); None otherwise."""
        if not self.hosts:
            return None
        n = self.hosts[0].ranks
        if any(h.ranks != n or h.first_rank != k * n for k, h in enumerate(self.hosts)):
            return None
        return n

    def stage_hosts(self, stage: int) -> list[PlacedHost]:
        """The hosts holding ranks of `stage`."""
        return [h for h in self.hosts if stage in h.stages]
