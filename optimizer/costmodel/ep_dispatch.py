"""Network copies of a routed token under hierarchical MoE dispatch (DeepEP / HybridEP).

The plain all-to-all sends every one of a token's top_k copies to its expert's GPU, so (N - 1) / N of them cross the
network when the EP group spans N nodes. DeepEP's normal kernels send a token once to each destination node, to the
GPU with the sender's in-node index, and forward it over NVLink to the GPUs of its experts there [DeepSeek-V3
report, arXiv 2412.19437 §3.2.2; deepseek-ai/DeepEP README, "normal kernels with NVLink and RDMA forwarding"];
NVIDIA's HybridEP does the same (RDMA between nodes, NVLink TMA inside) [DeepEP hybrid-ep branch,
Hybrid-EP_Intra-node_Implementation.md]. Megatron runs both through its flex dispatcher (--moe-token-dispatcher-type
flex, --moe-flex-dispatcher-backend deepep | hybridep; transformer_config.py, Megatron-LM d98e8a6).

Group-limited routing caps the nodes a token reaches: with num_groups groups of experts and group_topk of them picked
per token, and groups nested in nodes (Megatron: "Node-limited routing: set moe_router_num_groups equal to the number
of nodes in the EP group"), a token reaches at most group_topk nodes (DeepSeek-V3: 4 of 8).

Routing is taken as balanced and uniform (the load-balancing losses and bias terms aim at it): a node is reached
unless all of a token's picks miss it, a hypergeometric probability; under group-limited routing every picked group
is taken to receive one of the token's experts, an upper bound that keeps the estimate on the slow side.
"""

from __future__ import annotations

from math import comb

from optimizer.spec.model_spec import MoESpec


def reached_probability(items: int, per_node: int, picks: int) -> float:
    """Probability that `picks` distinct draws from `items` (of which `per_node` lie on one node) hit that node."""
    if per_node <= 0 or picks <= 0:
        return 0.0
    return 1.0 - comb(items - per_node, picks) / comb(items, picks)


def remote_nodes_per_token(moe: MoESpec, nodes: int) -> float:
    """Expected number of other nodes a token's experts lie on, when the EP group spans `nodes` nodes holding equal
    shares of the experts."""
    if nodes <= 1:
        return 0.0
    e, k = moe.num_experts, moe.top_k
    p = reached_probability(e, e // nodes, k) if e % nodes == 0 else min(1.0, k / nodes)
    g, m = moe.num_groups, moe.group_topk
    if g is not None and m is not None and g % nodes == 0:  # groups nest in nodes: pick m of g groups
        p = min(p, reached_probability(g, g // nodes, m))
    return (nodes - 1) * p


def deepep_network_share(moe: MoESpec, nodes: int) -> float:
    """Bytes crossing the network under hierarchical dispatch, as a share of what the plain all-to-all sends there
    (top_k (nodes - 1) / nodes copies per token)."""
    if nodes <= 1:
        return 1.0
    plain = moe.top_k * (nodes - 1) / nodes
    return min(1.0, remote_nodes_per_token(moe, nodes) / plain)
