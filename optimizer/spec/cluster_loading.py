"""Build a ClusterSpec from YAML, from a preset (`dgx-h100:4` = four nodes), or from `nvidia-smi topo -m`."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from optimizer.errors import DomainError, UnknownNameError
from optimizer.spec.cluster_spec import ClusterSpec, IntraNodeFabric
from optimizer.spec.json_booleans import refuse_booleans
from optimizer.spec.validation_errors import domain_error_from_validation
from optimizer.spec.yaml_documents import read_document, shown_path, yaml_mapping

# NVLink 3 and 4 carry 25 GB/s per direction per link (A100: 12 links = 300 GB/s, H100: 18 links = 450 GB/s);
# NVLink 5 carries 50 GB/s per link [NV NVLink product pages; ST].
NVLINK_GBYTES_PER_LINK = 25.0


def build_cluster(data: dict[str, Any]) -> ClusterSpec:
    """Validate a mapping into a ClusterSpec; errors name the field. A boolean where a number goes is refused
    (pydantic would read false as 0: a pool without NICs)."""
    refuse_booleans(ClusterSpec, data, "cluster")
    try:
        return ClusterSpec.model_validate(data)
    except ValidationError as exc:
        raise domain_error_from_validation(exc, "cluster", data, ClusterSpec) from None


def load_cluster_yaml(text: str, source: str = "cluster") -> ClusterSpec:
    """Parse the YAML inventory format."""
    return build_cluster(yaml_mapping(text, "cluster", source, "with `pools`"))


def cluster_preset_names() -> list[str]:
    """Shipped cluster presets (use `NAME:NODES` to set the node count)."""
    folder = resources.files("optimizer.spec") / "presets" / "clusters"
    return sorted(p.name.removesuffix(".yaml") for p in folder.iterdir() if p.name.endswith(".yaml"))


def load_cluster_preset(ref: str) -> ClusterSpec:
    """`dgx-h100` (the preset's own node count) or `dgx-h100:16` (16 nodes)."""
    name, _, count = ref.partition(":")
    known = cluster_preset_names()
    # Looked up among the presets, not probed as a file: a 100,000-character name failed in the file system
    # (OSError: file name too long) [issue 37 item 3].
    if name.lower() not in known:
        raise UnknownNameError("cluster", shown_path(name, 60), known)
    res = resources.files("optimizer.spec") / "presets" / "clusters" / f"{name.lower()}.yaml"
    data = yaml.safe_load(res.read_text())
    if count:
        if not (count.isascii() and count.isdigit()) or len(count) > 6 or int(count) < 1:
            shown = count if len(count) <= 20 else f"{count[:20]}... ({len(count)} characters)"
            raise DomainError("cluster", f"node count after ':' must be an integer from 1 to 999999 (got {shown!r})")
        data["pools"][0]["nodes"] = int(count)
        data["name"] = f"{data['name']}-x{count}"
    return build_cluster(data)


def resolve_cluster(ref: str) -> ClusterSpec:
    """A preset reference or a path to a YAML inventory."""
    path = Path(ref)
    if path.suffix in (".yaml", ".yml", ".json"):
        return load_cluster_yaml(read_document(path, "cluster"), source=str(path))
    return load_cluster_preset(ref)


def fabric_from_nvidia_smi_topo(text: str) -> tuple[int, IntraNodeFabric, int]:
    """Parse `nvidia-smi topo -m`: (GPUs per node, intra-node fabric, NIC count).

    NV# between two GPUs means # bonded NVLinks; PIX/PXB/PHB/NODE/SYS mean the pair talks over PCIe (and the CPU).
    The NVLink domain is the group of GPUs joined by NVLinks; its bandwidth is the smallest bond times
    NVLINK_GBYTES_PER_LINK.
    """
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    header_idx = next(
        (i for i, ln in enumerate(lines) if re.search(r"\bGPU0\b", ln) and not ln.startswith("GPU0")), None
    )
    if header_idx is None:
        raise DomainError("topology", "no header row with GPU0 found; paste the output of `nvidia-smi topo -m`")
    header = lines[header_idx].split()
    gpu_cols = [c for c in header if re.fullmatch(r"GPU\d+", c)]
    nic_cols = [c for c in header if re.fullmatch(r"(NIC\d+|mlx\d+_\d+)", c)]
    rows: dict[str, list[str]] = {}
    for ln in lines[header_idx + 1 :]:
        parts = ln.split()
        if parts and re.fullmatch(r"GPU\d+", parts[0]):
            rows[parts[0]] = parts[1 : 1 + len(gpu_cols)]
    if not gpu_cols or len(rows) != len(gpu_cols):
        raise DomainError("topology", f"found {len(rows)} GPU rows for {len(gpu_cols)} GPU columns (GPU0, GPU1...)")
    n = len(gpu_cols)
    links: dict[tuple[int, int], int] = {}
    for i, g in enumerate(gpu_cols):
        for j, cell in enumerate(rows[g]):
            m = re.fullmatch(r"NV(\d+)", cell)
            if m and i != j:
                links[(i, j)] = int(m.group(1))
    # NVLink domains: connected components over NV edges.
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for i, j in links:
        parent[find(i)] = find(j)
    sizes: dict[int, int] = {}
    for i in range(n):
        sizes[find(i)] = sizes.get(find(i), 0) + 1
    domain = min(sizes.values())
    if not links or domain < 2:
        return n, IntraNodeFabric(kind="pcie", domain_size=1), len(nic_cols)
    bond = min(links.values())
    try:
        fabric = IntraNodeFabric(kind="nvlink", gbytes_per_s=bond * NVLINK_GBYTES_PER_LINK, domain_size=domain)
    except ValidationError as exc:  # e.g. NV999999: more links than any GPU has
        raise domain_error_from_validation(exc, "topology") from None
    return n, fabric, len(nic_cols)


def cluster_document_from_topo(
    text: str, gpu: str, nodes: int = 1, nic_gbps: float = 400.0, pool: str = "pool"
) -> dict[str, Any]:
    """An inventory document with one pool of `nodes` nodes like the one `nvidia-smi topo -m` describes
    (NVLink vs PCIe inside the node, data NIC count), validated."""
    gpn, fabric, nics = fabric_from_nvidia_smi_topo(text)
    spec: dict[str, Any] = {
        "name": pool,
        "pools": [
            {
                "name": pool,
                "gpu": gpu,
                "nodes": nodes,
                "gpus_per_node": gpn,
                "intra_node": fabric.model_dump(exclude_none=True),
                "inter_node": {"nics_per_node": nics, "gbits_per_s": nic_gbps},
            }
        ],
    }
    build_cluster(spec)
    return spec
