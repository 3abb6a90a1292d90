"""What an SLA plan returns: the fleet of replicas in serving words."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ReplicaShape(BaseModel):
    """One replica shape and what it sustains within the targets."""

    role: str = Field(description="replica (prefill and decode together), prefill or decode")
    pool: str
    gpu: str
    tp: int
    pp: int
    dp: int = Field(default=1, description="Attention data-parallel ranks inside the replica (wide EP).")
    ep: int
    overlap: bool = Field(default=False, description="EP all-to-all under the other micro-batch (two-batch overlap).")
    gpus: int = Field(description="GPUs per replica.")
    rate: float = Field(description="Highest requests/s one replica sustains within the targets.")
    ttft_p90_s: float | None = Field(default=None, description="p90 TTFT at that rate (prefill roles).")
    tpot_s: float | None = Field(default=None, description="Mean TPOT at that rate (decode roles).")
    concurrency: float = Field(default=0.0, description="Sequences decoding at that rate.")
    kv_tokens: float = Field(default=0.0, description="KV-cache capacity, tokens.")
    kv_blocks: int = Field(default=0, description="KV-cache capacity in the engine's blocks.")
    max_seqs: int = Field(description="The engine's sequence limit per iteration.")
    max_batched_tokens: int = Field(description="The engine's token budget per iteration.")
    memory_fraction: float = Field(default=0.9, description="The engine's memory fraction the KV capacity assumes.")
    price_per_hour: float | None = Field(default=None, description="The replica's GPUs at the pool's price.")


class FleetGroup(BaseModel):
    """`count` replicas of one shape."""

    shape: ReplicaShape
    count: int


class FleetPlan(BaseModel):
    """A serving fleet: the answer of an SLA plan, in serving words."""

    mode: str = Field(description="aggregated or disaggregated")
    groups: list[FleetGroup]
    gpus: int
    capacity_rate: float = Field(description="Requests/s the fleet sustains within the targets.")
    served_rate: float = Field(description="Requests/s planned for (the target, or the capacity for max_rate).")
    ttft_p90_s: float = Field(description="Worst p90 TTFT over the fleet's groups at the planned load.")
    tpot_s: float = Field(description="Worst mean TPOT over the fleet's groups at the planned load.")
    output_tokens_per_s_per_gpu: float
    price_per_hour: float | None = None
    price_per_million_tokens: float | None = Field(default=None, description="Per million output tokens.")
    kv_transfer_s: float | None = Field(default=None, description="Prefill-to-decode KV transfer per request.")
    why: str = Field(description="Why this mode, against the other.")
