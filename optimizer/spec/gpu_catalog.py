"""Built-in GPU catalog. Every figure names its source; users add their own types with `GPUSpec`.

Sources (keys as in docs/costmodel-sources.md):
  [ST]  stas00/ml-engineering @744d01e, compute/accelerator/README.md: peak TFLOP/s, memory, MAMF tables.
  [LA]  cli99/llm-analysis gpu_configs/*.json.
  [DS3] DeepSeek-V3 technical report, arXiv:2412.19437 §3.2 (H800 NVLink/IB figures).
  [NV]  vendor datasheets (NVIDIA A100/H100/H200/B200/GB200/L40S/RTX 6000 Ada, AMD MI250X/MI300X).
All TFLOP/s are dense (no sparsity). Bandwidths are unidirectional GB/s (1e9 bytes/s) per GPU.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from optimizer.errors import UnknownNameError

Family = Literal[
    "volta", "turing", "ampere", "hopper", "blackwell", "blackwell-ultra", "ada", "cdna2", "cdna3", "cdna4", "other"
]


class GPUSpec(BaseModel):
    """One accelerator type, as the cost model sees it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, max_length=64, description="Catalog name, e.g. H100-SXM-80GB.")
    family: Family = Field(default="other", description="Architecture family; selects efficiency constants.")
    bf16_tflops: float = Field(gt=0, le=100_000, description="Dense BF16/FP16 tensor-core peak, TFLOP/s.")
    fp8_tflops: float | None = Field(
        default=None, gt=0, le=200_000, description="Dense FP8 peak, TFLOP/s; None if unsupported."
    )
    memory_gib: float = Field(gt=0, le=10_000, description="Usable device memory, GiB (2^30 bytes).")
    memory_tbps: float = Field(gt=0, le=1_000, description="Peak HBM/GDDR bandwidth, TB/s.")
    scaleup_gbytes_per_s: float = Field(
        default=0.0,
        ge=0,
        le=100_000,
        description="NVLink/Infinity Fabric bandwidth per GPU, GB/s per direction.",
    )
    scaleup_domain: int = Field(default=1, ge=1, le=100_000, description="GPUs in one scale-up domain.")
    pcie_gen: int = Field(default=4, ge=3, le=7, description="PCIe generation of the host link.")
    host_gbytes_per_s: float | None = Field(
        default=None,
        gt=0,
        le=10_000,
        description="GPU <-> host memory bandwidth per direction, GB/s, when it is not the PCIe link (NVLink-C2C).",
    )
    sm_count: int = Field(
        default=108,
        ge=1,
        le=10_000,
        description="Streaming multiprocessors (CUs on AMD); sets GEMM wave size.",
    )
    mamf_fraction: float = Field(
        default=0.75, gt=0, le=1, description="Maximum achievable matmul FLOP/s as a fraction of peak [ST]."
    )
    source: str = Field(default="user-defined", max_length=500, description="Where the figures come from.")

    @property
    def memory_bytes(self) -> float:
        """Device memory in bytes."""
        return self.memory_gib * 2**30


def _gpu(**kw: object) -> GPUSpec:
    return GPUSpec.model_validate(kw)


# SM counts from the vendor architecture whitepapers (A100 108, H100 SXM 132, H100 PCIe 114, B200 148 per
# package as exposed, Ada AD102 142 in L40S/RTX 6000 Ada, MI250X 110 CUs per GCD, MI300X 304 CUs) [NV; AMD].
BUILTIN_GPUS: dict[str, GPUSpec] = {
    g.name: g
    for g in (
        # V100 (Volta, compute capability 7.0): FP16 tensor cores only, 125 TF SXM2 / 112 TF PCIe / 130 TF V100S,
        # HBM2 at 0.9 TB/s (V100S 1.134), NVLink2 300 GB/s total = 150 GB/s/dir per GPU on SXM2; no NVLink on PCIe
        # [NV V100 datasheet]; 80 SMs [NV Volta architecture whitepaper]. DGX-1 links 8 in a hybrid cube mesh, DGX-2
        # (SXM3, its nvidia-smi name) 16 over NVSwitch at the same per-GPU rate: the cluster preset sets the domain.
        # No MAMF in [ST]: cuBLAS FP16 GEMM at M = N = K = 8192 reached ~101 of 112 TF on a V100 PCIe, 0.90
        # [NVIDIA developer forums, "Understanding IPC and issue slot utilization when using Tensor Cores", 2019].
        *(
            _gpu(
                name=name,
                sm_count=80,
                family="volta",
                bf16_tflops=tflops,
                memory_gib=gib,
                memory_tbps=tbps,
                scaleup_gbytes_per_s=link,
                scaleup_domain=8 if link else 1,
                pcie_gen=3,
                mamf_fraction=0.90,
                source="NV V100 datasheet; MAMF from NVIDIA developer forums (V100 PCIe cuBLAS FP16)",
            )
            for name, tflops, gib, tbps, link in (
                ("V100-SXM2-16GB", 125, 16, 0.9, 150),
                ("V100-SXM2-32GB", 125, 32, 0.9, 150),
                ("V100-PCIe-16GB", 112, 16, 0.9, 0),
                ("V100-PCIe-32GB", 112, 32, 0.9, 0),
                ("V100S-PCIe-32GB", 130, 32, 1.134, 0),
            )
        ),
        # A100: 312 TF dense BF16 [NV A100 datasheet; ST]; HBM 1.555 / 2.039 TB/s [ST]; NVLink3 300 GB/s/dir [ST];
        # MAMF 271/312 = 0.87 SXM, 253/312 = 0.81 PCIe [ST MAMF table].
        # PCIe A100: NVLink bridge pairs, 600 GB/s bidirectional = 300/dir, domain 2 [ST; NV A100 PCIe].
        *(
            _gpu(
                name=name,
                sm_count=108,
                family="ampere",
                bf16_tflops=312,
                memory_gib=gib,
                memory_tbps=tbps,
                scaleup_gbytes_per_s=300,
                scaleup_domain=domain,
                pcie_gen=4,
                mamf_fraction=mamf,
                source=source,
            )
            for name, gib, tbps, domain, mamf, source in (
                ("A100-SXM-40GB", 40, 1.555, 8, 0.87, "ST; NV A100"),
                ("A100-SXM-80GB", 80, 2.039, 8, 0.87, "ST; NV A100"),
                ("A100-PCIe-40GB", 40, 1.555, 2, 0.81, "ST; NV A100 PCIe"),
                ("A100-PCIe-80GB", 80, 1.935, 2, 0.81, "ST; NV A100 PCIe"),
            )
        ),
        # H100 SXM: 989 BF16 / 1979 FP8, 3.35 TB/s, NVLink4 450/dir, 8-GPU HGX [ST]; MAMF 794.5/989 = 0.80 [ST].
        _gpu(
            name="H100-SXM-80GB",
            sm_count=132,
            family="hopper",
            bf16_tflops=989,
            fp8_tflops=1979,
            memory_gib=80,
            memory_tbps=3.35,
            scaleup_gbytes_per_s=450,
            scaleup_domain=8,
            pcie_gen=5,
            mamf_fraction=0.80,
            source="ST; NV H100",
        ),
        # H100 PCIe: 756 / 1513, 2.0 TB/s, NVLink bridge 600 bidir [ST]; MAMF not in [ST]: H100 SXM's 0.80 assumed.
        _gpu(
            name="H100-PCIe-80GB",
            sm_count=114,
            family="hopper",
            bf16_tflops=756,
            fp8_tflops=1513,
            memory_gib=80,
            memory_tbps=2.0,
            scaleup_gbytes_per_s=300,
            scaleup_domain=2,
            pcie_gen=5,
            mamf_fraction=0.80,
            source="ST; NV H100 PCIe; MAMF assumed = H100 SXM",
        ),
        # H100 NVL (PCIe card, 350-400 W): 1,671 / 3,341 TFLOP/s BF16 / FP8 with sparsity = 835.5 / 1,670.5 dense,
        # 94 GB HBM3 at 3.9 TB/s, NVLink bridge 600 GB/s bidirectional (pairs) = 300/dir, PCIe Gen5 [NV H100
        # datasheet, "H100 NVL" column]. The GH100 die with H100 SXM's 132 SMs; the lower peak is its clock under the
        # card's power cap. MAMF not published: H100 SXM's 0.80 assumed.
        _gpu(
            name="H100-NVL-94GB",
            sm_count=132,
            family="hopper",
            bf16_tflops=835.5,
            fp8_tflops=1670.5,
            memory_gib=94,
            memory_tbps=3.9,
            scaleup_gbytes_per_s=300,
            scaleup_domain=2,
            pcie_gen=5,
            mamf_fraction=0.80,
            source="NV H100 datasheet (H100 NVL); MAMF assumed = H100 SXM",
        ),
        # H800: H100 compute with NVLink cut to 400 GB/s bidirectional = 200/dir [NV H800; DS3 §3.2.2].
        _gpu(
            name="H800-SXM-80GB",
            sm_count=132,
            family="hopper",
            bf16_tflops=989,
            fp8_tflops=1979,
            memory_gib=80,
            memory_tbps=3.35,
            scaleup_gbytes_per_s=200,
            scaleup_domain=8,
            pcie_gen=5,
            mamf_fraction=0.80,
            source="NV H800; DS3",
        ),
        # GH200 Grace Hopper superchip: the H100 GPU (132 SMs, 989 / 1979 dense BF16 / FP8) with 96 GB HBM3 at 4.0 TB/s
        # or 144 GB HBM3e at 4.9 TB/s, NVLink4 450 GB/s per direction, NVLink-C2C to Grace at 450 GB/s per direction
        # [NV GH200 Grace Hopper Superchip datasheet]; nodes of 4 (Alps, Jupiter; HPE Cray EX254n) share NVLink.
        # MAMF not published: H100 SXM's 0.80 assumed (same die).
        *(
            _gpu(
                name=name,
                sm_count=132,
                family="hopper",
                bf16_tflops=989,
                fp8_tflops=1979,
                memory_gib=gib,
                memory_tbps=tbps,
                scaleup_gbytes_per_s=450,
                scaleup_domain=4,
                pcie_gen=5,
                host_gbytes_per_s=450,
                mamf_fraction=0.80,
                source="NV GH200 datasheet; MAMF assumed = H100 SXM",
            )
            for name, gib, tbps in (("GH200-96GB", 96, 4.0), ("GH200-144GB", 144, 4.9))
        ),
        # H20: the export Hopper, 148 / 296 TF dense BF16 / FP8, 96 GB HBM3 at 4.0 TB/s, NVLink 900 GB/s
        # bidirectional = 450/dir [NV H20 product brief as reported by SemiAnalysis, 2023-11]; MAMF as H100.
        _gpu(
            name="H20-96GB",
            sm_count=78,
            family="hopper",
            bf16_tflops=148,
            fp8_tflops=296,
            memory_gib=96,
            memory_tbps=4.0,
            scaleup_gbytes_per_s=450,
            scaleup_domain=8,
            pcie_gen=5,
            mamf_fraction=0.80,
            source="NV H20 brief (SemiAnalysis); MAMF of H100 assumed",
        ),
        # A800: A100 80GB SXM with NVLink cut to 400 GB/s bidirectional = 200/dir [NV A800 datasheet].
        _gpu(
            name="A800-SXM-80GB",
            sm_count=108,
            family="ampere",
            bf16_tflops=312,
            memory_gib=80,
            memory_tbps=2.039,
            scaleup_gbytes_per_s=200,
            scaleup_domain=8,
            pcie_gen=4,
            mamf_fraction=0.87,
            source="NV A800; MAMF of A100 SXM",
        ),
        # H200: 141 GB HBM3e at 4.8 TB/s, same compute and NVLink as H100 [ST]; BF16 MAMF assumed = H100.
        _gpu(
            name="H200-SXM-141GB",
            sm_count=132,
            family="hopper",
            bf16_tflops=989,
            fp8_tflops=1979,
            memory_gib=141,
            memory_tbps=4.8,
            scaleup_gbytes_per_s=450,
            scaleup_domain=8,
            pcie_gen=5,
            mamf_fraction=0.80,
            source="ST; NV H200",
        ),
        # H200 NVL (PCIe card, up to 600 W): 1,671 / 3,341 TFLOP/s BF16 / FP8 with sparsity = 835.5 / 1,670.5 dense,
        # 141 GB HBM3e at 4.8 TB/s, 2- or 4-way NVLink bridge 900 GB/s bidirectional = 450/dir, PCIe Gen5 [NV H200
        # datasheet, "H200 NVL" column]; SMs as H100 SXM (same die; the peak is the clock under the cap). MAMF as H100.
        _gpu(
            name="H200-NVL-141GB",
            sm_count=132,
            family="hopper",
            bf16_tflops=835.5,
            fp8_tflops=1670.5,
            memory_gib=141,
            memory_tbps=4.8,
            scaleup_gbytes_per_s=450,
            scaleup_domain=4,
            pcie_gen=5,
            mamf_fraction=0.80,
            source="NV H200 datasheet (H200 NVL); MAMF assumed = H100 SXM",
        ),
        # B200 (HGX, 1000 W): 2250 / 4500, 180 GB usable, 8 TB/s, NVLink5 900/dir [ST]; MAMF 1745/2250 = 0.78 [ST].
        _gpu(
            name="B200-180GB",
            sm_count=148,
            family="blackwell",
            bf16_tflops=2250,
            fp8_tflops=4500,
            memory_gib=180,
            memory_tbps=8.0,
            scaleup_gbytes_per_s=900,
            scaleup_domain=8,
            pcie_gen=5,
            mamf_fraction=0.78,
            source="ST; NV B200",
        ),
        # GB200 NVL72 (per GPU): 2500 / 5000, 186 GB, 8 TB/s, 72-GPU NVLink domain [ST]; MAMF 1822/2500 = 0.73 [ST].
        _gpu(
            name="GB200-186GB",
            sm_count=152,
            family="blackwell",
            bf16_tflops=2500,
            fp8_tflops=5000,
            memory_gib=186,
            memory_tbps=8.0,
            scaleup_gbytes_per_s=900,
            scaleup_domain=72,
            pcie_gen=5,
            # NVLink-C2C to the Grace CPU: 900 GB/s bidirectional per link [TE docs cpu_offloading.rst]
            host_gbytes_per_s=450,
            mamf_fraction=0.73,
            source="ST; NV GB200 NVL72",
        ),
        # Blackwell Ultra, dense peaks per GPU [Verda, "NVIDIA GB300 NVL72: GPU Architecture & Performance",
        # per-GPU specifications; G. Lockwood, B300 notes]: B300 (HGX, 1100 W) 2250 / 4500 TF BF16 / FP8 (as B200),
        # 270 GB HBM3e at 7.7 TB/s, PCIe Gen6; GB300 (NVL72, 1400 W) 2500 / 5000, 279 GB at 8 TB/s, 72-GPU
        # NVLink5 domain at 900 GB/s per direction, NVLink-C2C to Grace. 160 SMs per package. No MAMF figure is
        # published; the same peaks run faster at the higher power limits (1400 W vs GB200's 1200 W, 1100 W vs
        # B200's 1000 W). Derived from Megatron-Bridge runs that differ only in the GPU (same container, same knobs;
        # performance-summary-archive.md): GB300 / GB200 Llama 3 70B FP8 FSDP 64 (26.04) 5243 / 4143 = 1.27, Llama 3
        # 70B FP8 8 GPUs tp1 pp2 vp20 (26.06) 7481 / 6206 = 1.21 -> 0.73 x 1.24 = 0.90; B300 / B200 DeepSeek-V3
        # MXFP8 tp1 pp16 ep8 (26.02.01, 26.04) 1.11 -> 0.78 x 1.11 = 0.87. Family blackwell-ultra: twice Blackwell's
        # special-function (exp) throughput, so attention's softmax no longer stalls the tensor cores [NVIDIA
        # technical blog, "Making Softmax More Efficient with NVIDIA Blackwell Ultra"; constants
        # FLASH_ATTENTION_EFFICIENCY].
        _gpu(
            name="B300-270GB",
            sm_count=160,
            family="blackwell-ultra",
            bf16_tflops=2250,
            fp8_tflops=4500,
            memory_gib=270,
            memory_tbps=7.7,
            scaleup_gbytes_per_s=900,
            scaleup_domain=8,
            pcie_gen=6,
            mamf_fraction=0.87,
            source="Verda GB300 NVL72 per-GPU table; Lockwood B300; MAMF from Megatron-Bridge B300/B200 pairs",
        ),
        _gpu(
            name="GB300-279GB",
            sm_count=160,
            family="blackwell-ultra",
            bf16_tflops=2500,
            fp8_tflops=5000,
            memory_gib=279,
            memory_tbps=8.0,
            scaleup_gbytes_per_s=900,
            scaleup_domain=72,
            pcie_gen=6,
            host_gbytes_per_s=450,  # NVLink-C2C to Grace, as GB200 [TE docs cpu_offloading.rst]
            mamf_fraction=0.90,
            source="Verda GB300 NVL72 per-GPU table; Lockwood B300; MAMF from Megatron-Bridge GB300/GB200 pairs",
        ),
        # L40S: 362 / 733, 48 GB GDDR6 at 0.864 TB/s, no NVLink, PCIe4 [ST; NV L40S]. No MAMF in [ST]:
        # the A100 PCIe fraction 0.81 is assumed.
        _gpu(
            name="L40S-48GB",
            sm_count=142,
            family="ada",
            bf16_tflops=362,
            fp8_tflops=733,
            memory_gib=48,
            memory_tbps=0.864,
            scaleup_gbytes_per_s=0,
            scaleup_domain=1,
            pcie_gen=4,
            mamf_fraction=0.81,
            source="ST; NV L40S; MAMF assumed = A100 PCIe",
        ),
        # Inference-tier PCIe cards, no NVLink (A40's two-card bridge aside), dense tensor rates = the datasheets'
        # figures without sparsity; no MAMF in [ST]: the A100 PCIe fraction 0.81 is assumed, as for L40S.
        # A10: 125 TF BF16, 24 GB GDDR6 at 600 GB/s, 72 SMs (GA102) [NV A10 datasheet].
        # A40: 149.7 TF BF16, 48 GB GDDR6 at 696 GB/s, 84 SMs, NVLink bridge 112.5 GB/s bidirectional between two
        # cards [NV A40 datasheet].
        # L4: 121 / 242 TF BF16 / FP8, 24 GB GDDR6 at 300 GB/s, 58 SMs (AD104) [NV L4 datasheet].
        # T4 (Turing): 65 TF FP16, no BF16, 16 GB GDDR6 at 320 GB/s, 40 SMs [NV T4 datasheet].
        *(
            _gpu(
                name=name,
                sm_count=sms,
                family=family,
                bf16_tflops=tflops,
                fp8_tflops=fp8,
                memory_gib=gib,
                memory_tbps=tbps,
                scaleup_gbytes_per_s=link,
                scaleup_domain=2 if link else 1,
                pcie_gen=3 if family == "turing" else 4,
                mamf_fraction=0.81,
                source=f"NV {name.split('-')[0]} datasheet; MAMF assumed = A100 PCIe",
            )
            for name, sms, family, tflops, fp8, gib, tbps, link in (
                ("A10-24GB", 72, "ampere", 125.0, None, 24, 0.6, 0.0),
                ("A40-48GB", 84, "ampere", 149.7, None, 48, 0.696, 56.25),
                ("L4-24GB", 58, "ada", 121.0, 242.0, 24, 0.3, 0.0),
                ("T4-16GB", 40, "turing", 65.0, None, 16, 0.32, 0.0),
            )
        ),
        # RTX 6000 Ada: ~364 / ~728 (datasheet's 1457 FP8 with sparsity halved), 48 GB at 0.96 TB/s [ST].
        _gpu(
            name="RTX-6000-Ada-48GB",
            sm_count=142,
            family="ada",
            bf16_tflops=364,
            fp8_tflops=728,
            memory_gib=48,
            memory_tbps=0.96,
            scaleup_gbytes_per_s=0,
            scaleup_domain=1,
            pcie_gen=4,
            mamf_fraction=0.81,
            source="ST; NV RTX 6000 Ada; MAMF assumed = A100 PCIe",
        ),
        # MI250X, one GCD (what ROCm exposes as a device): 191.5 TF, 64 GB at 1.6 TB/s [ST]; Infinity Fabric
        # all-to-all 350 GB/s/dir per package, halved per GCD (derived); MAMF 147/191.5 = 0.77 [ST].
        _gpu(
            name="MI250X-GCD-64GB",
            sm_count=110,
            family="cdna2",
            bf16_tflops=191.5,
            memory_gib=64,
            memory_tbps=1.6,
            scaleup_gbytes_per_s=175,
            scaleup_domain=8,
            pcie_gen=4,
            mamf_fraction=0.77,
            source="ST; AMD MI250X",
        ),
        # MI300X: 1307 / 2615, 192 GB at 5.3 TB/s, Infinity Fabric 448 GB/s/dir aggregate [ST];
        # MAMF 668-782/1300 = 0.51-0.60 [ST], midpoint 0.55.
        _gpu(
            name="MI300X-192GB",
            sm_count=304,
            family="cdna3",
            bf16_tflops=1307,
            fp8_tflops=2615,
            memory_gib=192,
            memory_tbps=5.3,
            scaleup_gbytes_per_s=448,
            scaleup_domain=8,
            pcie_gen=5,
            mamf_fraction=0.55,
            source="ST; AMD MI300X",
        ),
        # MI325X: MI300X's CDNA 3 die (1307 / 2615 dense, 304 CUs) with 256 GB HBM3E at 6 TB/s, same Infinity Fabric
        # [AMD MI325X product brief; aiwiki MI325X]; MAMF as MI300X (same compute die).
        _gpu(
            name="MI325X-256GB",
            sm_count=304,
            family="cdna3",
            bf16_tflops=1307,
            fp8_tflops=2615,
            memory_gib=256,
            memory_tbps=6.0,
            scaleup_gbytes_per_s=448,
            scaleup_domain=8,
            pcie_gen=5,
            mamf_fraction=0.55,
            source="AMD MI325X; MAMF of MI300X assumed",
        ),
        # MI355X (CDNA 4, 1400 W): 2500 / 5000 dense BF16 / FP8, 256 CUs (8 XCDs x 32), 288 GB HBM3E at 8 TB/s,
        # Infinity Fabric as MI300X [AMD CDNA 4 whitepaper; ISSCC 2026 via world-today-news: 32 CUs per XCD, FP8
        # 5 PF; Boston MI355X]. No MAMF published: MI300X's 0.55 is assumed (the same ROCm GEMM stack).
        _gpu(
            name="MI355X-288GB",
            sm_count=256,
            family="cdna4",
            bf16_tflops=2500,
            fp8_tflops=5000,
            memory_gib=288,
            memory_tbps=8.0,
            scaleup_gbytes_per_s=448,
            scaleup_domain=8,
            pcie_gen=5,
            mamf_fraction=0.55,
            source="AMD MI355X; MAMF of MI300X assumed",
        ),
    )
}

# Other spellings found in papers, nvidia-smi and the calibration data.
ALIASES: dict[str, str] = {
    "V100": "V100-SXM2-32GB",
    "V100-32GB": "V100-SXM2-32GB",
    "V100-16GB": "V100-SXM2-16GB",
    "V100-SXM3-32GB": "V100-SXM2-32GB",
    "V100S": "V100S-PCIe-32GB",
    "A100-SXM4-40GB": "A100-SXM-40GB",
    "A100-SXM4-80GB": "A100-SXM-80GB",
    "A100-40GB": "A100-SXM-40GB",
    "A100-80GB": "A100-SXM-80GB",
    "A100": "A100-SXM-80GB",
    "H100-SXM5-80GB": "H100-SXM-80GB",
    "H100": "H100-SXM-80GB",
    "H100-80GB": "H100-SXM-80GB",
    "H800": "H800-SXM-80GB",
    "H20": "H20-96GB",
    "A800": "A800-SXM-80GB",
    "A800-80GB": "A800-SXM-80GB",
    "H200": "H200-SXM-141GB",
    "H100-PCIe": "H100-PCIe-80GB",
    "H100-NVL": "H100-NVL-94GB",
    "H200-NVL": "H200-NVL-141GB",
    "GH200": "GH200-96GB",
    "GH200-480GB": "GH200-96GB",
    "B200": "B200-180GB",
    "GB200": "GB200-186GB",
    "B300": "B300-270GB",
    "GB300": "GB300-279GB",
    "L40S": "L40S-48GB",
    "A10": "A10-24GB",
    "A40": "A40-48GB",
    "L4": "L4-24GB",
    "T4": "T4-16GB",
    "RTX-6000-Ada": "RTX-6000-Ada-48GB",
    "MI250X": "MI250X-GCD-64GB",
    "MI300X": "MI300X-192GB",
    "MI325X": "MI325X-256GB",
    "MI355X": "MI355X-288GB",
}


def canonical_gpu_name(name: str) -> str:
    """A GPU name as papers, nvidia-smi and rocm-smi spell it, reduced to the catalog's spelling: no vendor prefix,
    hyphens for spaces and underscores, SXM2/4/5 as SXM, no memory-type suffix ("NVIDIA H100 80GB HBM3" ->
    "h100-80gb", "NVIDIA A100-SXM4-80GB" -> "a100-sxm-80gb", "AMD Instinct MI300X" -> "mi300x"). The same reduction
    reads Kubernetes GPU Feature Discovery's product labels (spaces as hyphens: "NVIDIA-H100-80GB-HBM3") and
    Slurm's GRES types (AutoDetect=nvml lower-cases the name with underscores: "nvidia_h100_80gb_hbm3")."""
    s = re.sub(r"[\s_/]+", "-", name.strip().lower())
    for prefix in ("nvidia-", "amd-instinct-", "amd-", "instinct-", "tesla-"):
        if s.startswith(prefix):
            s = s[len(prefix) :]
    s = re.sub(r"(\d+)-gb\b", r"\1gb", s)
    s = re.sub(r"-?(hbm3e|hbm3|hbm2e|hbm2)$", "", s)
    s = re.sub(r"sxm[2-5]", "sxm", s)
    return re.sub(r"-+", "-", s).strip("-")


def resolve_gpu(name: str, custom: dict[str, GPUSpec] | None = None, field: str = "gpu") -> GPUSpec:
    """Look up a GPU by name (case-insensitive, aliases and the spellings canonical_gpu_name reduces allowed);
    user-defined types take precedence."""
    pool = dict(BUILTIN_GPUS)
    if custom:
        pool.update(custom)
    if name in pool:
        return pool[name]
    lowered = {k.lower(): v for k, v in pool.items()}
    key = name.lower()
    if key in lowered:
        return lowered[key]
    alias = {k.lower(): v for k, v in ALIASES.items()}.get(key)
    if alias is not None:
        return pool[alias]
    canonical = canonical_gpu_name(name)
    by_canonical = {canonical_gpu_name(k): v for k, v in pool.items()}
    if canonical in by_canonical:
        return by_canonical[canonical]
    alias = {canonical_gpu_name(k): v for k, v in ALIASES.items()}.get(canonical)
    if alias is not None:
        return pool[alias]
    raise UnknownNameError(field, name, pool)


# Volta (compute capability 7.0) has FP16 tensor cores and none for BF16, which Ampere (8.0) added [NVIDIA A100
# Tensor Core GPU Architecture whitepaper, "BF16"]. It also has no FlashAttention kernel: flash-attn runs on Turing,
# Ampere and newer and stops on V100 with "GPU with CUDA capability 7 0 is not supported" [Dao-AILab/flash-attention
# issues #148 and #524]; Megatron-LM and DeepSpeed run the unfused (scale-mask-softmax) attention there.
# Turing (T4, 7.5) has no BF16 either, and FlashAttention-2 "currently supports Ampere, Ada, or Hopper GPUs"
# [flash-attention README]; only the retired FlashAttention 1.x ran on Turing.
FP16_ONLY_FAMILIES: frozenset[str] = frozenset({"volta", "turing"})
NO_FLASH_ATTENTION_FAMILIES: frozenset[str] = frozenset({"volta", "turing"})


def has_bf16(gpu: GPUSpec) -> bool:
    """Whether the GPU has BF16 tensor cores (Volta computes in FP16 only)."""
    return gpu.family not in FP16_ONLY_FAMILIES


def has_flash_attention(gpu: GPUSpec) -> bool:
    """Whether a fused flash-attention kernel runs on the GPU."""
    return gpu.family not in NO_FLASH_ATTENTION_FAMILIES


def has_transformer_engine(gpu: GPUSpec) -> bool:
    """Whether Transformer Engine runs on the GPU: Ampere and newer ("Hardware: Blackwell, Hopper, Grace
    Hopper/Blackwell, Ada, Ampere", TE README.rst at d0067d0; AMD's ROCm port covers CDNA). On Volta and Turing,
    Megatron runs its local layers, without TE's userbuffers TP-comm overlap or fused attention."""
    return gpu.family not in FP16_ONLY_FAMILIES
