"""The software stack as an input: each training framework's dated releases, what a user of each gets by default,
which releases and GPUs the cost model's efficiency constants were fitted on, and how far a query's stack lies from
them (`stack_novelty`, named axes the interval code reads).

A version names the framework's release as users pin it: Megatron by its NeMo Framework / Megatron-Bridge container
(YY.MM, e.g. 25.09; a point release 26.04.01) or by its Megatron-Core version (0.14.0, core_r0.14.0; resolved through
the containers that ship it), torchtitan and DeepSpeed by their package version. An unknown or newer version is priced
as the nearest known release at or before it, and says so in its novelty.

Release-dependent efficiency is carried as fields of each Release, tied to the release that introduced it: the
fused-attention kernel generation it runs by default (costmodel FLASH_ATTENTION_EFFICIENCY), torchtitan's float8
recipe, and a compute factor on the GEMM efficiency. The Megatron releases' compute factors are 1.0: the Megatron-
Bridge DGX-H100 dense rows of containers 25.09-26.06 (1-3 per container, different models) show signed medians of
-0.3% to +12% with no order by container that their models do not explain (benchmarks/bridge_summary.py --all-rows),
and the NeMo 25.02-25.09 tables that might show one are quarantined (never fitted). torchtitan 0.0.2's is fitted
(TORCHTITAN_002_COMPUTE)."""

from __future__ import annotations

from dataclasses import dataclass, field

from optimizer.errors import DomainError
from optimizer.spec.gpu_catalog import GPUSpec
from optimizer.spec.names import AttentionKernel, FrameworkName
from optimizer.spec.workload import RELEASE_PATTERN, Fp8Recipe

VERSION_RULE = (
    "a release number: a container YY.MM[.NN] or Megatron-Core X.Y.Z (megatron), or a package version X.Y[.Z] "
    "(torchtitan, deepspeed)"
)


def parse_version(version: str, field_name: str = "workload.framework_version") -> tuple[int, int, int]:
    """(major, minor, patch) of a release name; a suffix (rc1, a0, +git) is read but not ordered."""
    m = RELEASE_PATTERN.match(version.strip())
    if m is None:
        raise DomainError(field_name, f"must be {VERSION_RULE} (got {version!r})")
    return int(m.group(1)), int(m.group(2) or 0), int(m.group(3) or 0)


@dataclass(frozen=True, slots=True)
class Release:
    """One dated release of a training framework and what running it means for the cost model."""

    framework: FrameworkName
    version: str
    """As users pin it: container YY.MM for megatron, package version for torchtitan and DeepSpeed."""
    date: str
    """Release month, YYYY-MM."""
    components: str
    """What it ships (Megatron-Core, Transformer Engine, CUDA, cuDNN, PyTorch), as its release notes list them."""
    attention_kernel: AttentionKernel
    """The fused-attention kernel generation it runs by default (TrainingWorkload.attention_kernel overrides)."""
    compute_factor: float
    """Factor on the GEMM efficiency against the fitted constant (costmodel FRAMEWORK_FACTOR); 1.0 = as fitted."""
    source: str
    """Where the figures come from (repository + commit + path, or document)."""
    core: str | None = None
    """megatron: the Megatron-Core version the container ships (a version below MEGATRON_CORE_BELOW names it)."""
    fp8_recipe: Fp8Recipe | None = None
    """The float8 scaling recipe it runs by default under precision fp8 (torchtitan's torchao recipes; None: not a
    choice of this framework)."""

    @property
    def key(self) -> tuple[int, int, int]:
        return parse_version(self.version)


# torchtitan 0.0.2 (PyTorch 2.7.0a0, torchao 0.10) ran its GEMMs slower than the fitted Hopper constant: the
# torchao float8 README's bf16 row (Llama3-8B on 8 H100, FSDP2, compile, per-op SAC: 6,150 tok/s/GPU) is predicted
# 21.7% fast at 1.0 (scored before this fit: the quarantine log, section torchao_float8_h100); 0.763 prices it
# exactly. Fitted on that row alone; the float8 tensorwise row of the same table is the check (-26.8% -> -8.9%).
# The source does not name the H100 variant: on Meta's 500 W H100s (torchtitan's own benchmarks ran there) part of
# this is the power cap's clock, which no datasheet publishes; it is kept as the release's term until a run states it.
TORCHTITAN_002_COMPUTE = 0.76  # calibrated 2026-11 (see above)
_MB = "NVIDIA-NeMo/Megatron-Bridge 067f987 docs/fern/versions/nightly/pages/releases/software-versions.mdx"
_TT = "pytorch/torchtitan b5bcd76 assets/version.txt history"
# The attention kernel stays fa3 on Hopper from these containers on: TE's DotProductAttention prefers cuDNN fused
# attention (FlashAttention-3 class, cuDNN 9) on Hopper (capabilities.py MEGATRON attention_kernel). Before
# FlashAttention-3 (Shah et al. 2024, July) the fused kernels were FlashAttention-2 class: NeMo 24.03's
# long-sequence table fits the fa2 pair within -3..+6% (records nemo2403_h100_long_sequence, costmodel constants).
RELEASES: tuple[Release, ...] = (
    Release(
        "megatron",
        "24.03",
        "2024-03",
        "NeMo Framework 24.03 (before FlashAttention-3)",
        "fa2",
        1.0,
        "NeMo 24.03 long-sequence performance table (accuracy/data/published_runs.json nemo2403_h100_long_sequence)",
    ),
    Release(
        "megatron",
        "24.07",
        "2024-07",
        "NeMo Framework 24.07 (the first container after FlashAttention-3, July 2024)",
        "fa3",
        1.0,
        "NVIDIA/NeMo 8e3d65dcfe docs/source/performance/performance_summary.md (Container NeMo24.07, DGX-H100, FP8; "
        "records nemo2412_h100_fp8, whose 24.12 documentation page carries this table)",
    ),
    Release(
        "megatron",
        "24.12",
        "2024-12",
        "NeMo Framework 24.12 (its performance page republished the 24.07 table; no run of its own here)",
        "fa3",
        1.0,
        "NVIDIA/NeMo d31653f792 (2024-12-12: the performance summary moved to the documentation site)",
    ),
    Release(
        "megatron",
        "25.04",
        "2025-04",
        "NeMo Framework 25.04 (rc2 for the long-sequence table)",
        "fa3",
        1.0,
        "NVIDIA/NeMo 19fadb67b0 docs/source/performance/performance_long_sequence.md (nemo2504_b200_long_sequence)",
    ),
    Release(
        "megatron",
        "25.09",
        "2025-09",
        "Megatron-Core 0.14.0, Transformer Engine 2.7.0, PyTorch 2.8.0a0 (nv25.6), CUDA 12.9.1, cuDNN 9.11",
        "fa3",
        1.0,
        _MB,
        core="0.14.0",
    ),
    Release(
        "megatron",
        "25.11",
        "2025-11",
        "Megatron-Core 0.15.0, Transformer Engine 2.9, PyTorch 2.9.0a0, CUDA 13.0.1, cuDNN 9.13.1",
        "fa3",
        1.0,
        _MB,
        core="0.15.0",
    ),
    Release(
        "megatron",
        "26.02",
        "2026-02",
        "Megatron-Core 0.16.0, Transformer Engine 2.12, PyTorch 2.10.0a0, CUDA 13.0.2, cuDNN 9.18",
        "fa3",
        1.0,
        _MB,
        core="0.16.0",
    ),
    Release(
        "megatron",
        "26.04",
        "2026-04",
        "Megatron-Core 0.17.0, Transformer Engine 2.14, PyTorch 2.11.0a0 (nv26.02), CUDA 13.1.1, cuDNN 9.20",
        "fa3",
        1.0,
        _MB,
        core="0.17.0",
    ),
    Release(
        "megatron",
        "26.06",
        "2026-06",
        "Megatron-Bridge performance summary 26.06 (docs/performance-summary-archive.md at 067f987)",
        "fa3",
        1.0,
        "NVIDIA-NeMo/Megatron-Bridge 067f987 docs/performance-summary-archive.md",
    ),
    Release(
        "megatron",
        "26.08",
        "2026-08",
        "Megatron-Bridge performance summary 26.08 (docs/performance-summary.md at 067f987)",
        "fa3",
        1.0,
        "NVIDIA-NeMo/Megatron-Bridge 067f987 docs/performance-summary.md",
    ),
    # torchtitan: SDPA with the cuDNN backend first since 5cfe514 (2025-03-20, capabilities.py TORCHTITAN); 0.0.2
    # (2024-04, the paper's snapshot era) ran PyTorch's default SDPA order, FlashAttention-2 first. assets/version.txt
    # read 0.0.2 from 2024-04 until 0.1.0 (2025-06-05), so the cuDNN-first change falls inside "0.0.2": fa2 is taken
    # for the whole span (TORCHTITAN_002_COMPUTE was fitted with it; with fa3 the fit would come out lower).
    # Float8: recipe_name unset = torchao Float8LinearConfig's default, tensorwise, in every release to 0.2.2; rowwise
    # became the default (tensorwise removed) on main in 6348d93 (2026-04-27), after 0.2.2
    # (torchtitan/components/quantization/float8.py Float8LinearConverter.Config.recipe_name).
    Release(
        "torchtitan",
        "0.0.2",
        "2024-04",
        "torchtitan 0.0.2 with the PyTorch 2.4-2.7 nightlies of its time",
        "fa2",
        TORCHTITAN_002_COMPUTE,
        f"{_TT}; compute factor fitted on pytorch/ao b795037 torchao/float8/README.md (torchao_float8_h100)",
        "tensorwise",
    ),
    Release(
        "torchtitan", "0.1.0", "2025-06", "torchtitan 0.1.0 (SDPA cuDNN backend first)", "fa3", 1.0, _TT, "tensorwise"
    ),
    Release("torchtitan", "0.2.0", "2025-10", "torchtitan 0.2.0", "fa3", 1.0, _TT, "tensorwise"),
    Release("torchtitan", "0.2.1", "2025-12", "torchtitan 0.2.1", "fa3", 1.0, _TT, "tensorwise"),
    Release("torchtitan", "0.2.2", "2026-02", "torchtitan 0.2.2", "fa3", 1.0, _TT, "tensorwise"),
    # DeepSpeed's runs in the fit (Narayanan 2021 Table 2 ZeRO-3; MT-NLG 2022) predate fused attention kernels in it;
    # its default kernel stays the framework's (capabilities.py DEEPSPEED: fa2).
    Release(
        "deepspeed",
        "0.5.0",
        "2021-08",
        "DeepSpeed 0.5 era (MT-NLG, Smith et al. 2022)",
        "fa2",
        1.0,
        "Smith et al. 2022 (arXiv 2201.11990) §3",
    ),
)


@dataclass(frozen=True, slots=True)
class FittedStack:
    """Which runs of a framework on a GPU family the cost model's constants were fitted on (published_runs.json
    groups; tests/optimizer/frameworks/test_releases.py checks them against the data)."""

    framework: FrameworkName
    family: str
    gpus: tuple[str, ...]
    """The catalog GPUs those runs ran on."""
    precisions: tuple[str, ...]
    releases: tuple[str, ...]
    """The releases among them (empty: none stated in the sources)."""
    groups: tuple[str, ...]


FITTED: tuple[FittedStack, ...] = (
    FittedStack(
        "megatron",
        "ampere",
        ("A100-SXM-80GB",),
        ("bf16", "fp16"),
        (),
        ("narayanan2021_table1_weak_scaling", "korthikanti2022_table5"),
    ),
    FittedStack("megatron", "volta", ("V100-SXM3-32GB-DGX2H",), ("fp16",), (), ("megatron2019_v100_model_parallel",)),
    FittedStack(
        "megatron",
        "hopper",
        ("H100-SXM-80GB",),
        ("bf16", "fp8"),
        ("24.03", "24.07", "25.09", "25.11", "26.02", "26.04", "26.06", "26.08"),
        ("megatron_lm_readme_2024_h100_weak_scaling", "nemo2403_h100_long_sequence", "nemo2412_h100_fp8"),
    ),
    FittedStack(
        "megatron",
        "blackwell",
        ("B200-180GB", "GB200-186GB"),
        ("bf16", "fp8"),
        ("25.04", "25.09", "25.11", "26.02", "26.04", "26.06", "26.08"),
        ("megatron_bridge_blackwell", "nemo2504_b200_long_sequence"),
    ),
    # Blackwell Ultra: the GB300 records, and B300 / GB300 peaks derived from the Megatron-Bridge B300 / GB300 vs
    # B200 / GB200 pairs of these containers (gpu_catalog.py; accuracy/leave_out.py HELD).
    FittedStack(
        "megatron",
        "blackwell-ultra",
        ("GB300-279GB", "B300-270GB"),
        ("fp8",),
        ("25.11", "26.02", "26.04", "26.06", "26.08"),
        ("megatron_bridge_blackwell",),
    ),
    # PyTorch FSDP stacks priced as torchtitan: MosaicML llm-foundry (FSDP1) and NeMo AutoModel (FSDP2).
    FittedStack("torchtitan", "ampere", ("A100-SXM-80GB",), ("bf16",), (), ("mosaicml_fsdp_a100",)),
    FittedStack(
        "torchtitan",
        "hopper",
        ("H100-SXM-80GB",),
        ("bf16", "fp8"),
        ("0.0.2",),
        ("mosaicml_fsdp_h100", "nemo_automodel_h100_fsdp2", "torchao_float8_h100"),
    ),
    FittedStack(
        "deepspeed",
        "ampere",
        ("A100-SXM-80GB",),
        ("bf16", "fp16"),
        ("0.5.0",),
        ("narayanan2021_table2_zero3", "smith2022_mtnlg_megatron_deepspeed"),
    ),
)


@dataclass(frozen=True, slots=True)
class ResolvedRelease:
    """The release a (framework, version) is priced as, and how it was found."""

    release: Release | None
    """None: no known release stands for it (priced with the framework's current defaults)."""
    asked: str | None
    match: str
    """exact | nearest_older (a version between known ones, or newer than all) | oldest (older than all known) |
    unstated (no version given: the newest known release's defaults, the fitted constants) | core_unmapped (a
    Megatron-Core version older than every container whose core version is known) | unknown_framework."""
    newer_than_known: bool = False
    """The version is newer than every known release."""


# Megatron containers are numbered YY.MM (24.03 onwards); a megatron version below this major is a Megatron-Core
# version (0.14.0, core_r0.14.0), resolved through the containers' `core`.
MEGATRON_CORE_BELOW = 20


def releases_of(framework: str) -> tuple[Release, ...]:
    """The known releases of one framework, oldest first."""
    return tuple(sorted((r for r in RELEASES if r.framework == framework), key=lambda r: r.key))


def resolve_release(framework: str, version: str | None) -> ResolvedRelease:
    """The known release `version` of `framework` is priced as: itself, else the nearest known release at or before
    it (the newest for a newer version), else the oldest known. No version: the newest known. A Megatron-Core version
    resolves through the containers that ship one."""
    known = releases_of(framework)
    if not known:
        return ResolvedRelease(None, version, "unknown_framework")
    if version is None:
        return ResolvedRelease(known[-1], None, "unstated")
    key = parse_version(version)
    keyed = [(r.key, r) for r in known]
    if framework == "megatron" and key[0] < MEGATRON_CORE_BELOW:
        keyed = sorted((parse_version(r.core), r) for r in known if r.core)
        if not keyed or key < keyed[0][0]:
            return ResolvedRelease(None, version, "core_unmapped")
    at_or_before = [(k, r) for k, r in keyed if k <= key]
    if not at_or_before:
        return ResolvedRelease(known[0], version, "oldest")
    best_key, best = at_or_before[-1]
    newer = key > keyed[-1][0]
    return ResolvedRelease(best, version, "exact" if best_key == key else "nearest_older", newer)


def release_attention_kernel(framework: str, version: str | None, default: AttentionKernel) -> AttentionKernel:
    """The attention kernel a stated release runs by default; `default` (the framework's) when no version."""
    if version is None:
        return default
    r = resolve_release(framework, version).release
    return default if r is None else r.attention_kernel


def release_fp8_recipe(framework: str, version: str | None) -> Fp8Recipe | None:
    """The float8 recipe a stated release runs by default (None: the framework's default, or not a choice)."""
    if version is None:
        return None
    r = resolve_release(framework, version).release
    return None if r is None else r.fp8_recipe


def release_compute_factor(framework: str, version: str | None) -> float:
    """The release's factor on the GEMM efficiency (1.0 = the fitted constant; see the module docstring)."""
    if version is None:
        return 1.0
    r = resolve_release(framework, version).release
    return 1.0 if r is None else r.compute_factor


@dataclass(frozen=True, slots=True)
class NoveltyAxis:
    """One way a query's stack lies outside what the constants were fitted on."""

    axis: str
    """framework | release | gpu_variant | precision."""
    detail: str


@dataclass(frozen=True, slots=True)
class StackNovelty:
    """How far a query's stack is from the fitted runs, along named axes (empty: inside the fit)."""

    framework: str
    version: str | None
    priced_as: str | None
    """The known release it is priced as (None: no release known for the framework)."""
    axes: tuple[NoveltyAxis, ...] = field(default_factory=tuple)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.axis for a in self.axes)

    def describe(self) -> str:
        return "; ".join(f"{a.axis}: {a.detail}" for a in self.axes)


def stack_novelty(framework: str, version: str | None, gpu: GPUSpec, precision: str) -> StackNovelty:
    """Which named axes of the query (framework on this GPU family, release, GPU variant, precision) the fitted runs
    do not cover. For the interval code: each axis it names may widen the band by what the quarantine and left-out
    errors say that axis costs."""
    resolved = resolve_release(framework, version)
    priced_as = resolved.release.version if resolved.release else None
    fitted = [f for f in FITTED if f.framework == framework and f.family == gpu.family]
    axes: list[NoveltyAxis] = []
    if not fitted:
        axes.append(NoveltyAxis("framework", f"no fitted run of {framework} on {gpu.family} GPUs"))
    else:
        if version is not None:
            seen = {v for f in fitted for v in f.releases}
            if resolved.match == "core_unmapped":
                axes.append(
                    NoveltyAxis(
                        "release",
                        f"Megatron-Core {version} is older than every container with a known core version; priced "
                        "with the current defaults",
                    )
                )
            elif resolved.match in ("oldest", "unknown_framework") or resolved.newer_than_known:
                axes.append(
                    NoveltyAxis(
                        "release", f"{framework} {version} is outside the known releases; priced as {priced_as}"
                    )
                )
            elif priced_as not in seen:
                axes.append(NoveltyAxis("release", f"no fitted run of {framework} {priced_as} on {gpu.family}"))
        if not any(gpu.name in f.gpus for f in fitted):
            axes.append(NoveltyAxis("gpu_variant", f"{gpu.name}: no fitted run on this variant of {gpu.family}"))
        if not any(precision in f.precisions for f in fitted):
            axes.append(NoveltyAxis("precision", f"no fitted {precision} run of {framework} on {gpu.family}"))
    return StackNovelty(framework, version, priced_as, tuple(axes))
