"""Which catalog GPU a scheduler's GPU name means when the name leaves the variant open.

Slurm sites often type their GRES by family only (`gpu:a100:8`, `gpu:h100:8`, gres.conf `Type=a100`): the name
says neither the memory (A100 comes with 40 GB and 80 GB [NVIDIA A100 datasheet]) nor the form factor (SXM or PCIe).
The catalog's alias picks one variant (`A100` -> A100-SXM-80GB); a site whose cards are the 40 GB ones would get
plans assuming twice the memory. So: a mapping the user gives (`--gpu a100=A100-SXM-40GB`) wins; else the memory a
node's features or GRES state (`40gb`, `gpu_mem_40g`, `a100_40gb`) picks the variant of that size; else the
alias's variant is kept and said to be an assumption [issue 47 item 1].
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from optimizer.errors import DomainError
from optimizer.spec.gpu_catalog import BUILTIN_GPUS, GPUSpec, canonical_gpu_name, resolve_gpu

# A memory size in a feature or GRES token: "40gb", "80GiB", "gpu_mem_40g", "a100-40gb", "mem:80g" (a bare "100g"
# is not one: network features say "100g" too).
_MEMORY = re.compile(
    r"(?:^|[^a-z0-9])(?:(?:gpu[-_]?)?mem[-_:=]?(\d{2,3})\s*g(?:i?b)?|(\d{2,3})\s*gi?b)(?:$|[^a-z0-9])", re.I
)


@dataclass(frozen=True, slots=True)
class GpuChoice:
    """The catalog GPU chosen for a scheduler's name, and how."""

    gpu: GPUSpec
    how: str
    """mapped (the user's --gpu), memory (read from the node), assumed (the catalog's default variant), named."""
    read: str = ""
    """The node's token the memory was read from (how == memory)."""


def parse_gpu_mappings(items: list[str], field: str = "--gpu") -> dict[str, GPUSpec]:
    """`name=CATALOG-NAME` pairs (`a100=A100-SXM-40GB`) as {canonical scheduler name: catalog GPU}."""
    out: dict[str, GPUSpec] = {}
    for item in items:
        name, sep, target = item.partition("=")
        if not sep or not name.strip() or not target.strip():
            raise DomainError(field, f"{item!r}: expected NAME=GPU, e.g. a100=A100-SXM-40GB")
        out[canonical_gpu_name(name)] = resolve_gpu(target.strip(), None, field)
    return out


def variants(name: str, custom: dict[str, GPUSpec] | None = None) -> list[GPUSpec]:
    """The catalog GPUs a family name may mean: those whose canonical name extends it (`a100` -> the A100 SXM and
    PCIe parts of 40 and 80 GB)."""
    stem = canonical_gpu_name(name)
    pool = {**BUILTIN_GPUS, **(custom or {})}
    return [g for k, g in sorted(pool.items()) if canonical_gpu_name(k).startswith(stem + "-")]


def memory_hint(tokens: list[str]) -> tuple[int, str] | None:
    """(GB, the token) of the first feature or GRES token that states a memory size."""
    for token in tokens:
        m = _MEMORY.search(token)
        if m:
            return int(m.group(1) or m.group(2)), token
    return None


def _gb(gpu: GPUSpec) -> int | None:
    m = re.search(r"(\d+)GB$", gpu.name)
    return int(m.group(1)) if m else None


def choose(
    name: str, default: GPUSpec, tokens: list[str], mapping: dict[str, GPUSpec], custom: dict[str, GPUSpec] | None
) -> GpuChoice:
    """The GPU a scheduler's `name` (resolved by the catalog to `default`) means on a node whose features and GRES
    are `tokens`."""
    mapped = mapping.get(canonical_gpu_name(name))
    if mapped is not None:
        return GpuChoice(mapped, "mapped")
    options = variants(name, custom)
    if len(options) <= 1:  # the name says which part it is (a100-sxm-40gb, nvidia_h100_80gb_hbm3)
        return GpuChoice(default, "named")
    hint = memory_hint(tokens)
    if hint is not None:
        sized = [g for g in options if _gb(g) == hint[0]]
        if sized:
            same_form = [
                g for g in sized if g.name.replace(str(hint[0]), "") == default.name.replace(str(_gb(default)), "")
            ]
            return GpuChoice((same_form or sized)[0], "memory", hint[1])
    return GpuChoice(default, "assumed")


def assumption_note(name: str, choice: GpuChoice, nodes: int, custom: dict[str, GPUSpec] | None = None) -> str:
    """What the import says about a family name it had to read as one variant."""
    others = ", ".join(g.name for g in variants(name, custom) if g.name != choice.gpu.name)
    where = f"GPU type {name!r} on {nodes} node(s)"
    if choice.how == "memory":
        return f"{where}: read as {choice.gpu.name} (memory from {choice.read!r}); other variants: {others}"
    return (
        f"{where} names no variant: assumed {choice.gpu.name} ({choice.gpu.memory_gib:g} GiB); other variants: "
        f"{others}. If that is wrong, map it: --gpu {canonical_gpu_name(name)}=<one of them>"
    )
