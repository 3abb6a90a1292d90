"""Activation offload to host memory and its exposed copy time [TE cpu_offloading.rst; Megatron
--cpu-offloading-num-layers]."""

from __future__ import annotations

from optimizer.costmodel.constants import PCIE_EFFICIENCY
from optimizer.spec.cluster_spec import PCIE_GBYTES_PER_S
from optimizer.spec.gpu_catalog import GPUSpec

BYTES_PER_GB = 1e9  # GB/s -> B/s (decimal GB, as the catalog's link rates)


def host_gbytes_per_s(gpu: GPUSpec) -> float:
    """GPU <-> host memory bandwidth per direction: the GPU's own host link (NVLink-C2C), else its PCIe
    generation at the copy efficiency measured for PCIe [cluster_spec PCIE_GBYTES_PER_S; constants]."""
    if gpu.host_gbytes_per_s:
        return gpu.host_gbytes_per_s
    return PCIE_GBYTES_PER_S[gpu.pcie_gen] * PCIE_EFFICIENCY


def offloaded_bytes(acts: float, offload_layers: int, layers: int) -> float:
    """Activation bytes of a stage's first `offload_layers` of `layers` layers, which go to host memory while the
    forward runs on and come back under the backward; at most layers - offload_layers layers' sets stay on the GPU
    [TE cpu_offloading.rst 'Default Offloading Scheduling'; Megatron --cpu-offloading-num-layers]."""
    return acts * offload_layers / layers


def offload_exposed(gpu: GPUSpec, moved: float, fwd: float, bwd: float) -> tuple[float, float]:
    """(forward, backward) copy time of `moved` bytes each way that the pass's compute cannot cover, seconds. The
    copies use the copy engines, so only what exceeds the pass (`fwd`, `bwd` seconds) is exposed."""
    copy = moved / (host_gbytes_per_s(gpu) * BYTES_PER_GB)
    return max(0.0, copy - fwd), max(0.0, copy - bwd)
