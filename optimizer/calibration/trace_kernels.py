"""What a GPU kernel of a PyTorch profiler (Kineto) trace is, from its name and args [issue 54 §2].

Which events are GPU work, and the split into communication / memory / compute, follow HolisticTraceAnalysis
(HTA, github:facebookresearch/HolisticTraceAnalysis f4d0062, also PyPI 0.5.0):
- GPU events: category matching `(kernel)|(gpu_mem.+)` [hta/common/types.py KERNEL_CATEGORY_PATTERN, used by
  hta/common/trace_symbol_table.py get_gpu_kernel_cat_ids], on a stream [hta/common/trace_filter.py GPUKernelFilter].
- communication: name matching `^nccl.*Kernel` [hta/utils/utils.py NCCL_KERNEL_RE]; RCCL keeps NCCL's kernel names
  (`ncclDevKernel_Generic_4`, `ncclKernel_AllReduce_...`) [ROCm/rccl src/device/common.h].
- memory: `^Memcpy|^Memset|^dma` [hta/utils/utils.py MEMORY_KERNEL_RE].
- compute: everything else except `.*Sync` [hta/utils/utils.py NCCL_COMPUTE_KERNEL_RE, is_compute_kernel];
  HTA's "OTHER" (synchronisation) is neither.

HTA does not split compute further; the GEMM and attention rules below cite the libraries that name the kernels.
A collective's kind comes from the NCCL kernel name, `nccl(Dev)Kernel_<Collective>_...` [NVIDIA/nccl
src/device/generate.py: `ncclDevKernel_{coll}_{redop}_{ty}_{algo}_{proto}`; NCCL < 2.19 src/collectives/device/
common.h: `ncclKernel_{coll}_{algo}_{proto}_{redop}_{ty}`], or, where the trace has them, the kernel's
`Collective name` and `Process Group Name` / `Process Group Ranks` args [pytorch/pytorch torch/csrc/profiler/
standalone/execution_trace_observer.cpp and kineto's collective metadata: kParamCommsCallName "Collective name",
kProcessGroupName "Process Group Name", kGroupRanks "Process Group Ranks", PyTorch >= 2.2].
"""

from __future__ import annotations

import re
from typing import Literal

KernelClass = Literal["gemm", "attention", "other_compute", "memory", "communication", "sync"]
CollectiveKind = Literal[
    "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv", "broadcast", "reduce", "unknown"
]
COLLECTIVE_KINDS: tuple[CollectiveKind, ...] = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "send_recv",
    "broadcast",
    "reduce",
    "unknown",
)

# HTA's rules, verbatim [hta/common/types.py KERNEL_CATEGORY_PATTERN; hta/utils/utils.py NCCL_KERNEL_RE,
# MEMORY_KERNEL_RE, NCCL_COMPUTE_KERNEL_RE].
GPU_CATEGORY_RE = re.compile(r"(kernel)|(gpu_mem.+)", re.IGNORECASE)
COMM_RE = re.compile(r"^nccl.*Kernel")
MEMORY_RE = re.compile(r"(^Memcpy)|(^Memset)|(^dma)")
NOT_COMPUTE_RE = re.compile(r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)")

# Attention kernels, first (a fused attention kernel is not a GEMM even when its name says so):
# - flash: Dao-AILab/flash-attention csrc/flash_attn/src/flash_fwd_kernel.h `flash_fwd_kernel`,
#   `flash_bwd_dq_dk_dv_loop_kernel`; FA3 hopper/ `FlashAttnFwdSm90`; Triton/ROCm CK `attn_fwd`, `_attn_bwd`.
# - fmha: PyTorch's memory-efficient SDPA aten/src/ATen/native/transformers/cuda/mem_eff_attention
#   `fmha_cutlassF_*`, `fmha_cutlassB_*`; TransformerEngine / cuDNN fused attention `cudnn_generated_fort_native_sdpa`,
#   `sm90_xmma_*_fmha_*`, `fmha_v2_*` (TensorRT-LLM); cuDNN frontend `cudnn_sdpa`.
# - sdpa / FlexAttention: PyTorch torch/_inductor/kernel/flex_attention.py `triton_tem_fused_flex_attention`.
ATTENTION_RE = re.compile(
    r"flash|fmha|sdpa|_attn_fwd|_attn_bwd|attn_fwd|attn_bwd|flex_attention|FlashAttn|cudnn.*(attention|mha)"
    r"|paged_attention|flashinfer",
    re.IGNORECASE,
)
# GEMM kernels: cuBLAS / cuBLASLt (`ampere_sgemm_*`, `sm90_xmma_gemm_*`, `nvjet_*` from cuBLAS 12.8), CUTLASS
# (`cutlass::Kernel<cutlass_80_tensorop_s1688gemm_*>`, `cutlass::Kernel2<...gemm...>`), cuBLAS split-K reduction
# `splitKreduce_kernel`, rocBLAS / hipBLASLt Tensile kernels `Cijk_Ailk_Bljk_*` [ROCm/Tensile Tensile/
# SolutionStructs.py: the kernel name begins `Cijk_`], Triton matmuls from torch.compile `triton_tem_fused_mm` /
# `triton_.*_mm_`, DeepGEMM `fp8_gemm_kernel`, TransformerEngine `te_gemm`.
GEMM_RE = re.compile(
    r"gemm|nvjet|splitKreduce|^Cijk_|cublas|\bxmma\b|_mm_|triton_tem_fused_(b)?mm|matmul|wgmma",
    re.IGNORECASE,
)

# NCCL kernel name -> collective [NVIDIA/nccl src/device/generate.py coll names; NCCL < 2.19 the same names].
_NCCL_KIND: tuple[tuple[str, CollectiveKind], ...] = (
    ("AllReduce", "all_reduce"),
    ("AllGather", "all_gather"),
    ("ReduceScatter", "reduce_scatter"),
    ("AllToAll", "all_to_all"),
    ("SendRecv", "send_recv"),
    ("Send", "send_recv"),
    ("Recv", "send_recv"),
    ("Broadcast", "broadcast"),
    ("Reduce", "reduce"),
)
# torch.distributed's collective names in the `Collective name` arg [pytorch torch/csrc/distributed/c10d/
# ProcessGroupNCCL.cpp RECORD_PARAM_COMMS_DATA names: allreduce, allgather, _allgather_base, reduce_scatter,
# _reduce_scatter_base, all_to_all, all_to_allv, alltoall_base, broadcast, reduce, send, recv, ...].
_TORCH_KIND: tuple[tuple[str, CollectiveKind], ...] = (
    ("allreduce", "all_reduce"),
    ("all_reduce", "all_reduce"),
    ("allgather", "all_gather"),
    ("all_gather", "all_gather"),
    ("reduce_scatter", "reduce_scatter"),
    ("reducescatter", "reduce_scatter"),
    ("all_to_all", "all_to_all"),
    ("alltoall", "all_to_all"),
    ("broadcast", "broadcast"),
    ("send", "send_recv"),
    ("recv", "send_recv"),
    ("reduce", "reduce"),
)
_NCCL_NAME = re.compile(r"^nccl(?:Dev)?Kernel_([A-Za-z]+)")


def is_gpu_event(cat: str) -> bool:
    return GPU_CATEGORY_RE.search(cat) is not None


def kernel_class(name: str) -> KernelClass:
    """HTA's type of a GPU event's name, with compute split into GEMM, attention and the rest."""
    if COMM_RE.match(name):
        return "communication"
    if MEMORY_RE.match(name):
        return "memory"
    if NOT_COMPUTE_RE.match(name):
        return "sync"
    if ATTENTION_RE.search(name):
        return "attention"
    if GEMM_RE.search(name):
        return "gemm"
    return "other_compute"


def collective_kind(name: str, collective_arg: str | None = None) -> CollectiveKind:
    """The collective a communication kernel runs: from the trace's `Collective name` arg where present (it
    names all-to-all, which NCCL runs as SendRecv kernels), else from the kernel name."""
    if collective_arg:
        arg = collective_arg.lower().lstrip("_")
        for key, kind in _TORCH_KIND:
            if arg.startswith(key):
                return kind
    m = _NCCL_NAME.match(name)
    if m:
        coll = m.group(1)
        for key, kind in _NCCL_KIND:
            if coll.startswith(key):
                return kind
    return "unknown"
