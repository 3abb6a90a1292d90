"""How each training framework runs what it can run: the communication behaviour and fitted values the cost
terms read (what it can run is optimizer/frameworks/capabilities.py). Every entry cites the framework's code or the
published runs it was fitted on (snapshots as named in capabilities.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from optimizer.costmodel.memory import LOGIT_BYTES, UNFUSED_LOGIT_BYTES
from optimizer.errors import UnknownNameError
from optimizer.spec.names import FRAMEWORKS, FrameworkName

# torchtitan's async TP (torch._inductor micro-pipeline TP: fused all-gather-matmul / matmul-reduce-scatter over
# SymmetricMemory) hides far less of the TP traffic than the ideal the cost model allows (all but one chunk of tp,
# under the GEMMs). Fitted (least squares on log speedup; 0.40-0.50 equally good; float8 casts priced,
# costmodel/fp8_casts.py) on the five published vanilla vs async TP pairs: torchtitan
# benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md (Llama 3.1 70B FSDP 32 x TP 8: 1.09 bf16, 1.16 float8
# tensorwise; 8B FSDP 8 x TP 8: 1.10, 1.10) and llama3_h100_202412_torchtitan.md Table 4 (70B 2D, float8: 829 ->
# 876 TPS, 1.06). The ideal overlap predicted 1.18-1.34 on the same runs.
TORCHTITAN_ASYNC_TP_SHARE = 0.45  # calibrated 2026-11 on the pairs above


@dataclass(frozen=True, slots=True)
class FrameworkRuntime:
    """How one training framework communicates and computes: what the cost terms read."""

    name: FrameworkName
    zero3_collectives_per_layer: int
    """ZeRO-3 / FSDP: separate all-gathers (and reduce-scatters) per transformer layer and pass: DeepSpeed gathers
    each submodule's parameters on its own, FSDP and Megatron-FSDP one unit per layer."""
    zero3_overlap: float
    """Share of the overlappable ZeRO-3 / FSDP traffic that hides under compute (the rest is exposed)."""
    zero3_live_layers: float
    """ZeRO-3 / FSDP: unsharded layers alive at once (the one computing and the one prefetched)."""
    zero3_node_aggregation: bool
    """Whether ZeRO-3 / FSDP gathers share the node's NICs (NCCL rings over large buffers: each NIC carries 1/g of
    the bytes [formulas C7]) or each rank's full volume crosses its own NIC."""
    pp_scatter_gather: bool
    """Pipeline sends split over the TP ranks (1/tp each, re-gathered over NVLink) [N21 §4.1]."""
    grad_reduce_after_pipeline: bool
    """With pp > 1 the gradient reduction runs after the last micro-batch, not under the backward."""
    replica_reduce_every_microbatch: bool
    """With a shard group (ParallelConfig.shard_group) under ZeRO-2/3, the replicas all-reduce their gradient shards
    after every micro-batch's backward; otherwise only after the last one [formulas C9]."""
    bf16_optimizer_under_pp: bool
    """bf16 with ZeRO stage 0 under PP runs a separate optimizer wrapper (DeepSpeed BF16_Optimizer): its own
    ZeRO-1 (fp32 master and Adam sharded over DP) with a full fp32 gradient buffer that each micro-batch's bf16
    gradients are added into, gradients all-reduced in bf16 after the flush, updated bf16 weights all-gathered."""
    fp8_output_layer: bool
    """Under FP8 the output (logits) projection runs in FP8 too; otherwise it stays a BF16 GEMM."""
    selective_recompute: Literal["modules", "every_other_matmul"]
    """What recompute=selective keeps: "modules" drops what its recompute modules discard (Megatron's list);
    "every_other_matmul" is torchtitan's per-op policy (optimizer/costmodel/op_sac.py)."""
    tp_overlap_share: float
    """Share of the TP traffic that could hide under the GEMMs which the framework's TP-comm overlap does hide."""
    fp8_cast_bytes: tuple[float, float]
    """Under FP8, HBM bytes of the operand casts the framework runs as their own kernels, per GEMM input element and
    per output-gradient element of each linear (costmodel/fp8_casts.py); (0, 0) where they are fused."""
    logit_bytes: float
    """Bytes per logit (token x vocabulary entry on one GPU) the loss holds at its peak."""
    expert_gemm_streams: int | None
    """How many local experts' GEMMs run at once: each expert is its own GEMM launch, this many in flight (TE's
    multi-stream GroupedLinear: 4; a Python loop over experts: 1); None: one grouped kernel over all of them."""


MEGATRON = FrameworkRuntime(
    name="megatron",
    zero3_collectives_per_layer=1,
    zero3_overlap=1.0,
    zero3_live_layers=2.0,
    zero3_node_aggregation=True,
    pp_scatter_gather=True,
    grad_reduce_after_pipeline=False,
    # Megatron-FSDP all-reduces over the outer (replica) group only on the last micro-batch (megatron_fsdp.py
    # outer_fsdp_group_grad_reduce = use_hybrid_fsdp and is_last_microbatch); the distributed optimizer reduces
    # once per step anyway.
    replica_reduce_every_microbatch=False,
    bf16_optimizer_under_pp=False,
    fp8_output_layer=False,
    selective_recompute="modules",
    tp_overlap_share=1.0,
    fp8_cast_bytes=(0.0, 0.0),
    logit_bytes=LOGIT_BYTES,
    expert_gemm_streams=4,
)

DEEPSPEED = FrameworkRuntime(
    name="deepspeed",
    zero3_collectives_per_layer=6,
    # Calibrated on Narayanan 2021 Table 2 (ZeRO-3 without model parallelism, 384-2,240 A100): see
    # accuracy/data/published_runs.json group narayanan2021_table2_zero3.
    zero3_overlap=0.6,
    # The submodule in use and the one prefetched, each at most 4h^2 of a layer's 12h^2 parameters.
    zero3_live_layers=2 / 3,
    # Table 2's step times do not fall with more GPUs (175B: 66.7 s on 768 and on 1,536; 530B: ~180 s on 1,120 and
    # 2,240): the per-GPU traffic is the full parameter volume at the GPU's own NIC rate, not 1/8 of it.
    zero3_node_aggregation=False,
    pp_scatter_gather=False,
    grad_reduce_after_pipeline=True,
    # MiCS all-reduces over the replicate group at the accumulation boundary only (runtime/zero/mics.py
    # allreduce_mics_shard_grads: `if not self.is_gradient_accumulation_boundary(): return`).
    replica_reduce_every_microbatch=False,
    bf16_optimizer_under_pp=True,
    fp8_output_layer=False,
    selective_recompute="modules",
    tp_overlap_share=1.0,
    fp8_cast_bytes=(0.0, 0.0),
    logit_bytes=LOGIT_BYTES,
    expert_gemm_streams=1,
)

TORCHTITAN = FrameworkRuntime(
    name="torchtitan",
    zero3_collectives_per_layer=1,
    zero3_overlap=1.0,
    zero3_live_layers=2.0,
    zero3_node_aggregation=True,
    pp_scatter_gather=True,
    grad_reduce_after_pipeline=False,
    # FSDP2 foreach_reduce all-reduces the reduce-scatter output over the replicate group after every backward
    # unless set_requires_all_reduce(False), which torchtitan's trainer never calls (PyTorch
    # torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py; torchtitan b5bcd76).
    replica_reduce_every_microbatch=True,
    bf16_optimizer_under_pp=False,
    fp8_output_layer=True,
    selective_recompute="every_other_matmul",
    tp_overlap_share=TORCHTITAN_ASYNC_TP_SHARE,
    fp8_cast_bytes=(6.0, 8.0),
    logit_bytes=UNFUSED_LOGIT_BYTES,
    expert_gemm_streams=None,
)

RUNTIME_TABLE: dict[str, FrameworkRuntime] = {r.name: r for r in (MEGATRON, DEEPSPEED, TORCHTITAN)}


def runtime(name: str) -> FrameworkRuntime:
    """The runtime behaviour of framework `name` (one of FRAMEWORKS)."""
    if name not in RUNTIME_TABLE:
        raise UnknownNameError("framework", name, FRAMEWORKS)
    return RUNTIME_TABLE[name]
