"""Speculative decoding as the plan priced it (optimizer/costmodel/speculative.py: k draft tokens per sequence per
iteration), in each engine's own launch options at the plan's release. The drafter is the model's own MTP head where
it has one (DeepSeek-V3's `num_nextn_predict_layers`), else an EAGLE drafter: its checkpoint is the user's, written
as DRAFT_MODEL for them to replace."""

from __future__ import annotations

from optimizer.exports.engine_options import LaunchRelease
from optimizer.spec.workload import InferenceWorkload

DRAFT_MODEL = "DRAFT_MODEL"
"""Where the launch names an EAGLE drafter's checkpoint: the user's choice, never guessed."""

Pairs = list[tuple[str, object | None]]


def speculative_note(w: InferenceWorkload, mtp: bool) -> list[str]:
    """What the launch's speculative options carry, and what the user must supply."""
    if not w.spec_tokens:
        return []
    head = (
        f"the plan priced speculative decoding with {w.spec_tokens} draft token(s) at acceptance {w.acceptance_rate:g}"
    )
    if mtp:
        return [f"{head}: the model's own MTP head drafts them"]
    return [f"{head}: replace {DRAFT_MODEL} with the EAGLE drafter's checkpoint for this model"]


def vllm_speculative(w: InferenceWorkload, rel: LaunchRelease, mtp: bool) -> tuple[Pairs, list[str]]:
    """vLLM: --speculative-config {"method": "deepseek_mtp" | "eagle", "num_speculative_tokens": k} (vllm/config/
    speculative.py at v0.11.0); before it (v0.6.0, engine/arg_utils.py) --speculative-model with
    --num-speculative-tokens, which runs a draft checkpoint (no MTP method then)."""
    k = w.spec_tokens
    if not k:
        return [], []
    if rel.has("--speculative-config"):
        body = (
            f'"method": "deepseek_mtp", "num_speculative_tokens": {k}'
            if mtp
            else (f'"method": "eagle", "model": "{DRAFT_MODEL}", "num_speculative_tokens": {k}')
        )
        return [("--speculative-config", f"'{{{body}}}'")], speculative_note(w, mtp)
    return [("--speculative-model", DRAFT_MODEL), ("--num-speculative-tokens", k)], speculative_note(w, False)


def sglang_speculative(w: InferenceWorkload, rel: LaunchRelease, mtp: bool) -> tuple[Pairs, list[str]]:
    """SGLang: --speculative-algorithm EAGLE (DeepSeek's NextN / MTP head runs as EAGLE, its draft weights read from
    the model itself) with k steps of one token each: --speculative-num-steps k --speculative-eagle-topk 1
    --speculative-num-draft-tokens k + 1 (python/sglang/srt/server_args.py at v0.5.3)."""
    k = w.spec_tokens
    if not k:
        return [], []
    rel.require("--speculative-algorithm", "spec_tokens", f"speculative decoding with {k} draft tokens")
    pairs: Pairs = [("--speculative-algorithm", "EAGLE")]
    if not mtp:
        pairs.append(("--speculative-draft-model-path", DRAFT_MODEL))
    pairs += [
        ("--speculative-num-steps", k),
        ("--speculative-eagle-topk", 1),
        ("--speculative-num-draft-tokens", k + 1),
    ]
    return pairs, speculative_note(w, mtp)


def trtllm_speculative(w: InferenceWorkload, mtp: bool) -> tuple[list[str], list[str], list[str]]:
    """TensorRT-LLM: the extra-options YAML's speculative_config (tensorrt_llm/llmapi/llm_args.py at v1.0.0:
    MTPDecodingConfig num_nextn_predict_layers; EagleDecodingConfig max_draft_len, speculative_model_dir). Returns
    the YAML lines, their option names and the notes."""
    k = w.spec_tokens
    if not k:
        return [], [], []
    if mtp:
        line = f"speculative_config: {{decoding_type: MTP, num_nextn_predict_layers: {k}}}"
        names = ["speculative_config.decoding_type", "speculative_config.num_nextn_predict_layers"]
    else:
        line = f"speculative_config: {{decoding_type: Eagle, max_draft_len: {k}, speculative_model_dir: {DRAFT_MODEL}}}"
        names = [
            "speculative_config.decoding_type",
            "speculative_config.max_draft_len",
            "speculative_config.speculative_model_dir",
        ]
    return [line], names, speculative_note(w, mtp)
