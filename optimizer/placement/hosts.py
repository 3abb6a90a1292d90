"""The healthy hosts of a pool with their place in the fabric: the leaf switch above them and the NVLink domain
they share. Where the inventory does not say, the pool's own fabric stands in, as the cost model's tiers assume it
(costmodel/network.py pool_tiers): consecutive nodes in groups of pod_size under one leaf, and consecutive nodes in
groups of domain_size / gpus_per_node in one NVLink domain (GB200 / GB300 trays of one rack)."""

from __future__ import annotations

from dataclasses import dataclass

from optimizer.spec.cluster_spec import ClusterSpec, NodePool


@dataclass(frozen=True, slots=True)
class Host:
    """One healthy node of a pool."""

    name: str
    pool: str
    index: int
    """Position in the pool's node list (drained and failed nodes count: they keep their place in the rack)."""
    leaf: str
    """The leaf switch above it: the inventory's switches[0], else '<pool>/pod-<k>' (k = index // pod_size), else
    the pool (one non-blocking tier)."""
    domain: str
    """Its NVLink domain: the inventory's nvlink_domain, else '<pool>/nvl-<k>' for domains of several nodes (k =
    index // nodes per domain), else the node itself."""


def nodes_per_domain(cluster: ClusterSpec, pool: NodePool) -> int:
    """Nodes that share one NVLink domain when the inventory names none: domain_size / gpus_per_node for domains
    larger than a node (GB200 / GB300 NVL72 trays), else 1."""
    fabric = cluster.fabric_of(pool)
    domain = fabric.domain_size or 1
    if fabric.kind != "nvlink" or domain <= pool.gpus_per_node:
        return 1
    return max(1, domain // pool.gpus_per_node)


def healthy_hosts(cluster: ClusterSpec, pool: NodePool) -> list[Host]:
    """The pool's healthy nodes in list order, each with its leaf switch and NVLink domain."""
    per_domain = nodes_per_domain(cluster, pool)
    out = []
    for i, node in enumerate(pool.node_list):
        if node.state != "healthy":
            continue
        if node.switches:
            leaf = node.switches[0]
        elif pool.pod_size is not None:
            leaf = f"{pool.name}/pod-{i // pool.pod_size}"
        else:
            leaf = pool.name
        if node.nvlink_domain is not None:
            domain = node.nvlink_domain
        elif per_domain > 1:
            domain = f"{pool.name}/nvl-{i // per_domain}"
        else:
            domain = node.name
        out.append(Host(name=node.name, pool=pool.name, index=i, leaf=leaf, domain=domain))
    return out
