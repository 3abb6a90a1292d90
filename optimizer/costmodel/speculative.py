"""Speculative decoding as the engines run it for serving (DeepSeek MTP, EAGLE): each decode iteration a light
drafter proposes k tokens per sequence, one target forward verifies the k + 1 positions, and the accepted prefix plus
one target token is emitted [SGLang --speculative-algorithm EAGLE / NEXTN with --speculative-num-steps k
--speculative-eagle-topk 1 --speculative-num-draft-tokens k + 1; vLLM --speculative-config
{"method": "deepseek_mtp" | "eagle", "num_speculative_tokens": k}; TensorRT-LLM speculative_config MTP
num_nextn_predict_layers k].

- **Tokens per iteration.** With an acceptance rate a per drafted token (each accepted independently, the first
  rejection ending the run), an iteration emits (1 - a^(k+1)) / (1 - a) tokens per sequence [Leviathan, Kalman &
  Matias, "Fast Inference from Transformers via Speculative Decoding", ICML 2023, eq. 1]. The acceptance rate is
  an input: it depends on the data and the drafter (DeepSeek-V3 reports 85-90% for its second token, technical report
  arXiv 2412.19437 §5.4.3).
- **Verification.** The target runs k + 1 query positions per sequence: k + 1 GEMM rows, LM-head rows and attention
  queries, the cached context read once per sequence (the attention kernels take the positions of a sequence
  together: FlashMLA / FlashInfer multi-query decode).
- **Draft.** Each of the k draft steps is one transformer layer over the batch and the shared LM head (an MTP module
  is one block plus the shared embedding and output head, DeepSeek-V3 report §2.2; EAGLE's drafter is one decoder
  layer), priced as the target's last layer with its head.
"""

from __future__ import annotations

from optimizer.errors import DomainError


def tokens_per_step(draft_tokens: int, acceptance: float | None) -> float:
    """Tokens a sequence emits per decode iteration: 1 without drafting; (1 - a^(k+1)) / (1 - a) with k drafted."""
    if draft_tokens <= 0:
        return 1.0
    if acceptance is None or not 0.0 <= acceptance < 1.0:
        raise DomainError("workload.acceptance_rate", "speculative decoding needs an acceptance rate in [0, 1)")
    return (1.0 - acceptance ** (draft_tokens + 1)) / (1.0 - acceptance)
