"""MoE serving with attention data parallelism: how unevenly the routed tokens and the prompts land on the ranks, and
how the engines move the tokens to the experts and back.

Attention DP (TensorRT-LLM enable_attention_dp, SGLang --enable-dp-attention, vLLM --data-parallel-size on an MoE
model): each of dp ranks runs attention for its own sequences and holds their KV cache; the routed experts are shared
by all the ranks, spread whole over them (EP) or tensor-sharded over them (no EP: vLLM FusedMoEParallelConfig.make,
flatten_tp_across_dp; SGLang's MoE TP over --tp). Every MoE layer waits for its slowest rank:

- **Routed-expert load.** A batch of n tokens, each picking top_k distinct experts of E, puts on one EP rank (E/ep
  experts) a hypergeometric count per token (mean k/ep, variance k (1/ep)(1 - 1/ep)(E - k)/(E - 1)). The busiest of
  ep ranks carries the mean plus z_ep standard deviations of the sum, z_ep the expected maximum of ep standard normals
  (the heavily loaded balls-into-bins regime: m/n + sqrt(2 (m/n) ln n) [Raab & Steger, "Balls into bins - a simple
  and tight analysis", RANDOM 1998]; z_ep exact instead of its sqrt(2 ln ep) bound). Redundant expert replicas (EPLB)
  give a share R/E of the picks a second rank to go to, and a pick with a choice goes where the load is lower: its
  excess stays bounded while the one-choice picks' grows [Azar, Broder, Karlin & Upfal, "Balanced allocations",
  STOC 1994; Berenbrink et al., SIAM J. Comput. 2006 (heavily loaded case)], so only the (1 - R/E) share of the picks
  without a choice adds variance. Uniform routing is assumed (the load-balancing losses and bias aim at it); the
  hot experts of real traffic [TensorRT-LLM tech blog 4, "Scaling Expert Parallelism", Figures 1-11] are the case the
  redundant experts exist for and make it worse, so this is a lower bound on the imbalance.
- **Attention-DP prompts.** A prompt is not split across ranks: an iteration that admits prompts runs them whole on
  the ranks they were given (round robin over ranks sorted by load), and the ranks decoding beside them wait: "the
  execution time for the Attention module in any given iteration is bounded by the rank with the highest workload"
  [TensorRT-LLM tech blog 10, "ADP Balance Strategy": time_i = max_m time_{i,m}; baseline balance ratio 54% on
  DeepSeek-V3 8 x GB200, attention DP 8 x EP 8].
- **Dispatch and combine.** TensorRT-LLM on GPUs without multi-node NVLink all-gathers every rank's tokens to every
  rank before the MoE and reduce-scatters the outputs after (its all-to-all needs MNNVL, GB200, or the DeepEP opt-in
  TRTLLM_CAN_USE_DEEP_EP [tensorrt_llm/_torch/modules/fused_moe/fused_moe_cutlass.py and fused_moe_wide_ep.py,
  enable_alltoall / select_alltoall_method_type: otherwise "allgather/reducescatter"]); tensor-sharded experts under
  attention DP do the same in every engine (vLLM: "all-gather before / reduce-scatter after" across the flattened
  DP x TP group, fused_moe/config.py; SGLang dp_attention.py dp_gather / dp_scatter). SGLang with EP sends each token
  to its experts' ranks only (DeepEP all-to-all [LMSYS large-scale EP blog, 2025-05]), and so does vLLM with
  --enable-expert-parallel (its all2all backends).
"""

from __future__ import annotations

import math
from functools import lru_cache

from optimizer.spec.model_spec import MoESpec


@lru_cache(maxsize=256)
def expected_max_standard_normal(n: int) -> float:
    """E[max of n independent standard normals]: 0 for n = 1, 0.564 for 2, 0.846 for 3, 1.029 for 4, 1.424 for 8
    (the tables of Harter 1961, 'Expected values of normal order statistics', Biometrika 48); by the midpoint rule
    on x n phi(x) Phi(x)^(n-1) over [-8, 8]."""
    if n <= 1:
        return 0.0
    steps, lo, hi = 4000, -8.0, 8.0
    dx = (hi - lo) / steps
    total = 0.0
    for i in range(steps):
        x = lo + (i + 0.5) * dx
        phi = math.exp(-x * x / 2) / math.sqrt(2 * math.pi)
        cdf = 0.5 * (1 + math.erf(x / math.sqrt(2)))
        total += x * n * phi * cdf ** (n - 1) * dx
    return total


def routed_load_imbalance(moe: MoESpec, tokens: float, ep: int, redundant: int = 0) -> float:
    """Routed (token, expert) pairs on the busiest of ep EP ranks over the mean rank's, for `tokens` tokens routed
    together (every attention-DP rank's tokens of one MoE layer); 1 without EP. Capped where every token of the batch
    sends the rank all the picks it can (min(top_k, experts per rank))."""
    if ep <= 1 or tokens <= 0:
        return 1.0
    e, k = moe.num_experts, moe.top_k
    p = 1.0 / ep
    per_token_var = k * p * (1 - p) * (e - k) / max(1, e - 1)
    choice = min(1.0, redundant / e)
    mean = tokens * k * p
    excess = expected_max_standard_normal(ep) * math.sqrt(tokens * per_token_var * (1 - choice))
    cap = tokens * min(k, math.ceil((e + redundant) / ep))
    return min(mean + excess, cap) / mean


def busiest_rank_prompt_tokens(chunk_tokens: float, prompt_len: int, ranks: int) -> float:
    """Prompt tokens on the busiest attention-DP rank of an iteration that prefills `chunk_tokens` over `ranks`
    ranks: whole prompts dealt round robin (ceil(prompts / ranks) on the busiest), a chunk shorter than a prompt on
    one rank [TensorRT-LLM tech blog 10, baseline round-robin]."""
    if chunk_tokens <= 0:
        return 0.0
    if ranks <= 1 or chunk_tokens <= prompt_len:
        return chunk_tokens
    return min(chunk_tokens, prompt_len * math.ceil(chunk_tokens / prompt_len / ranks - 1e-9))
