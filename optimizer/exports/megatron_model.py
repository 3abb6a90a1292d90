"""The model a Megatron-LM launch builds, said whole: norm and its epsilon, positions (RoPE base and scaling, learned
or none), biases, query/key norms, activation, dropout, the vocabulary and its tokenizer, the MoE router and expert
GEMMs; and the environment validate_args requires. Without these flags Megatron's defaults apply (LayerNorm, learned
absolute positions, linear biases, dropout 0.1, a GPT-2 tokenizer: megatron/training/arguments.py and
megatron/core/transformer/transformer_config.py at core_v0.19.0), a different model from the one priced. Option names
as arguments.py of that release spells them (export_options.json)."""

from __future__ import annotations

from optimizer.spec.model_ids import PLACEHOLDER, preset_hf_id
from optimizer.spec.model_spec import ModelSpec, RopeScaling
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import TrainingWorkload

Pairs = list[tuple[str, object | None]]

# Megatron's own vocabulary padding multiple (arguments.py --make-vocab-size-divisible-by default 128), times tp
# (core/tokenizers/utils/build_tokenizer.py vocab_size_with_padding).
VOCAB_MULTIPLE = 128
# Llama 3.x RoPE scaling as Megatron hard-codes it: low_freq_factor 1, high_freq_factor 4, original context 8192
# (core/models/common/embeddings/rotary_pos_embedding.py RotaryEmbedding._apply_scaling defaults), and the factor
# pretrain_gpt.py builds with (training/models/gpt.py GPTModelConfig.rope_scaling_factor = 8.0: gpt_config_from_args
# passes --use-rope-scaling but not --rope-scaling-factor).
MEGATRON_LLAMA3 = {"low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
MEGATRON_LLAMA3_FACTOR = 8.0
# MLA YaRN fields with no flag of their own (MLATransformerConfig defaults: original_max_position_embeddings 4096,
# beta_fast 32, beta_slow 1; core/transformer/transformer_config.py).
MLA_YARN_DEFAULTS = {"original_max_position_embeddings": 4096, "beta_fast": 32.0, "beta_slow": 1.0}
# Megatron's dropout default (TransformerConfig hidden_dropout = attention_dropout = 0.1), GPT-3's rate (Brown et
# al. 2020 trained with 0.1 dropout, as GPT-2).
TRAINED_DROPOUT = 0.1


def _number(x: float) -> str:
    """A float as a flag value: 500000.0 -> 500000, 1e-06 -> 1e-06."""
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def norm_args(model: ModelSpec) -> Pairs:
    """Normalisation, its epsilon, the biases and the query/key norm."""
    pairs: Pairs = [
        ("--normalization", "RMSNorm" if model.norm == "rmsnorm" else "LayerNorm"),
        ("--norm-epsilon", _number(model.norm_eps)),
    ]
    if not model.linear_bias:  # TransformerConfig.add_bias_linear defaults to True
        pairs.append(("--disable-bias-linear", None))
    if model.qkv_bias and not model.linear_bias:
        pairs.append(("--add-qkv-bias", None))
    if model.qk_norm:
        pairs.append(("--qk-layernorm", None))
    if model.activation == "swiglu":
        pairs.append(("--swiglu", None))
    elif model.activation == "squared_relu":
        pairs.append(("--squared-relu", None))
    # gelu: Megatron's default activation (TransformerConfig.activation_func = F.gelu)
    rate = _number(TRAINED_DROPOUT if model.dropout else 0.0)
    pairs += [("--attention-dropout", rate), ("--hidden-dropout", rate)]
    return pairs


def position_args(model: ModelSpec, w: TrainingWorkload, notes: list[str]) -> Pairs:
    """The position encoding and the longest sequence it serves."""
    if model.positions == "learned":
        rows = max(model.learned_positions, w.seq_len)
        if rows > model.learned_positions:
            notes.append(
                f"the learned position table was priced at {model.learned_positions} positions; Megatron needs "
                f"--max-position-embeddings >= --seq-length, so it builds {rows}"
            )
        return [("--position-embedding-type", "learned_absolute"), ("--max-position-embeddings", rows)]
    if model.positions == "alibi":
        notes.append(
            "Megatron-LM has no ALiBi (--position-embedding-type: learned_absolute, rope, yarn, mrope, relative, "
            "none): the export trains without position embeddings (the same parameters and cost, not the same model)"
        )
        return [("--position-embedding-type", "none"), ("--max-position-embeddings", w.seq_len)]
    scaling = model.rope_scaling
    kind = "yarn" if scaling is not None and scaling.type == "yarn" and model.mla is None else "rope"
    pairs: Pairs = [("--position-embedding-type", kind), ("--max-position-embeddings", w.seq_len)]
    if not float(model.rope_theta).is_integer():  # --rotary-base is type=int (arguments.py)
        notes.append(f"--rotary-base takes an integer: RoPE base {model.rope_theta} rounded")
    pairs.append(("--rotary-base", round(model.rope_theta)))
    if model.rotary_fraction != 1.0:
        pairs.append(("--rotary-percent", _number(model.rotary_fraction)))
    if scaling is not None:
        pairs += _scaling_args(model, scaling, notes)
    return pairs


def _scaling_args(model: ModelSpec, s: RopeScaling, notes: list[str]) -> Pairs:
    if s.type == "llama3":
        given = {k: getattr(s, k) for k in MEGATRON_LLAMA3}
        if given != MEGATRON_LLAMA3 or s.factor != MEGATRON_LLAMA3_FACTOR:
            notes.append(
                f"RoPE llama3 scaling factor {s.factor}, {given}: pretrain_gpt.py builds factor "
                f"{MEGATRON_LLAMA3_FACTOR} with {MEGATRON_LLAMA3} (rotary_pos_embedding.py _apply_scaling)"
            )
        return [("--use-rope-scaling", None), ("--rope-scaling-factor", _number(s.factor))]
    pairs: Pairs = [("--rotary-scaling-factor", _number(s.factor))]
    if model.mla is None:
        pairs.append(("--yarn-original-max-position-embeddings", s.original_max_position_embeddings))
        pairs += [
            (f"--yarn-{k.replace('_', '-')}", _number(v))
            for k in ("beta_fast", "beta_slow")
            if (v := getattr(s, k)) is not None
        ]
    else:
        differs = {k: getattr(s, k) for k, d in MLA_YARN_DEFAULTS.items() if getattr(s, k) not in (None, d)}
        if differs:
            notes.append(f"YaRN {differs}: MLA reads these from MLATransformerConfig defaults {MLA_YARN_DEFAULTS}")
    if s.mscale is not None:
        pairs.append(("--mscale", _number(s.mscale)))
    if s.mscale_all_dim is not None:
        pairs.append(("--mscale-all-dim", _number(s.mscale_all_dim)))
    return pairs


def tokenizer_id(model: ModelSpec, model_ref: str) -> str | None:
    """The Hugging Face tokenizer of the model: `model_ref` when it is an id or directory (what the CLI resolves
    --model to), else a shipped preset's `_name_or_path`; None when unknown."""
    if model_ref and model_ref != PLACEHOLDER:
        hf = preset_hf_id(model_ref)
        if hf is not None:
            return hf
        if "/" in model_ref:
            return model_ref
    return preset_hf_id(model.name)


def padded_vocab(vocab: int, tp: int) -> tuple[int, int]:
    """(the --make-vocab-size-divisible-by that leaves `vocab` unpadded where one can, the vocabulary Megatron then
    builds): the largest power of two up to Megatron's 128 whose multiple of tp divides `vocab`; 1 where tp itself
    does not divide it (the vocabulary is sharded over tp: VocabParallelEmbedding divides it)."""
    d = VOCAB_MULTIPLE
    while d > 1 and vocab % (d * tp):
        d //= 2
    multiple = d * tp
    return d, -(-vocab // multiple) * multiple


def vocab_args(model: ModelSpec, c: ParallelConfig, model_ref: str, notes: list[str]) -> Pairs:
    """The vocabulary as priced and the tokenizer. --padded-vocab-size pins the embedding rows (Megatron keeps it
    instead of padding the tokenizer's own length: build_tokenizer.py _set_padded_vocab_size; a Hugging Face
    tokenizer's length can be short of config.json's vocab_size, Qwen's 151,665 of 151,936)."""
    divisor, padded = padded_vocab(model.vocab_size, c.tp)
    if padded != model.vocab_size:
        notes.append(
            f"vocabulary {model.vocab_size} is not divisible by tp {c.tp}: Megatron builds {padded} rows "
            f"(+{padded - model.vocab_size}) where {model.vocab_size} were priced"
        )
    hf = tokenizer_id(model, model_ref)
    if hf is None:
        hf = PLACEHOLDER
        notes.append(
            f"{model.name} has no Hugging Face id meshplan knows of: replace --tokenizer-model {PLACEHOLDER} with "
            "the tokenizer's Hugging Face id or directory"
        )
    return [
        ("--vocab-size", model.vocab_size),
        ("--make-vocab-size-divisible-by", divisor),
        ("--padded-vocab-size", padded),
        ("--tokenizer-type", "HuggingFaceTokenizer"),
        ("--tokenizer-model", hf),
    ]


def router_args(model: ModelSpec) -> Pairs:
    """The MoE router (scores, balancing) and the grouped expert GEMMs the plan priced (TE GroupedLinear:
    costmodel/framework_runtime.py MEGATRON expert_gemm_streams; without --moe-grouped-gemm Megatron loops over
    the experts, SequentialMLP)."""
    if model.moe is None:
        return []
    r = model.moe.router
    pairs: Pairs = [("--moe-router-score-function", r.score_function)]
    if r.pre_softmax:
        pairs.append(("--moe-router-pre-softmax", None))
    if r.expert_bias:
        pairs.append(("--moe-router-enable-expert-bias", None))
    if r.topk_scaling_factor is not None:
        pairs.append(("--moe-router-topk-scaling-factor", _number(r.topk_scaling_factor)))
    pairs.append(("--moe-router-load-balancing-type", r.load_balancing))
    if r.load_balancing != "none":
        pairs.append(("--moe-aux-loss-coeff", _number(r.aux_loss_coeff)))
    pairs.append(("--moe-grouped-gemm", None))
    return pairs


def megatron_env(c: ParallelConfig) -> dict[str, str]:
    """What validate_args requires of the environment: CUDA_DEVICE_MAX_CONNECTIONS=1 with tensor or context
    parallelism, unless Megatron-FSDP / torch FSDP2 (which the export never turns on) or
    --overlap-moe-expert-parallel-comm (which wants more connections) [arguments.py validate_args, core_v0.19.0:
    asserted on devices before Blackwell (get_device_arch_version() < 10); Blackwell accepts it]."""
    if (c.tp > 1 or c.cp > 1) and not c.ep_comm_overlap:
        return {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}
    return {}
