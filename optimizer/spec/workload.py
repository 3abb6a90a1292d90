"""What the cluster is asked to do: train (a global batch per step) or serve (prompts and outputs)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, field_validator, model_validator

from optimizer.errors import DomainError
from optimizer.spec.names import AttentionKernel, EngineName, FrameworkChoice
from optimizer.spec.workload_trace import LengthDistribution, TraceRequest, normalized, parse_trace

Precision = Literal["bf16", "fp16", "fp8"]
# A release number as frameworks/releases.py parses it (kept here so the workload refuses a malformed one itself).
RELEASE_PATTERN = re.compile(
    r"^(?:v|core_r|core_v)?(\d{1,4})(?:\.(\d{1,4}))?(?:\.(\d{1,4}))?(?:[.+-]?[A-Za-z0-9.+-]*)?$"
)
CudaGraphs = Literal["none", "layers", "full_iteration"]
Fp8Recipe = Literal["tensorwise", "rowwise"]


def _precision_rules(schema: dict[str, Any]) -> None:
    """The rules `_fp8_params` enforces, stated in the JSON Schema (OpenAPI 3.1 if/then) so that a request the
    schema calls valid is one the server accepts [issue 47 item 3]."""
    schema["allOf"] = [
        *schema.get("allOf", []),
        {
            "if": {"properties": {"fp8_param_gather": {"const": True}}, "required": ["fp8_param_gather"]},
            "then": {"properties": {"precision": {"const": "fp8"}}, "required": ["precision"]},
        },
        {
            "if": {
                "properties": {"precision_aware_optimizer": {"const": True}},
                "required": ["precision_aware_optimizer"],
            },
            "then": {"properties": {"precision": {"const": "bf16"}}},
        },
    ]


class TrainingWorkload(BaseModel):
    """One optimizer step of mixed-precision Adam training."""

    model_config = ConfigDict(frozen=True, extra="forbid", json_schema_extra=_precision_rules)

    mode: Literal["training"] = "training"
    global_batch_size: int = Field(ge=1, le=100_000_000, description="Sequences per optimizer step.")
    seq_len: int = Field(ge=1, le=100_000_000, description="Tokens per sequence.")
    precision: Precision = Field(default="bf16", description="GEMM precision (fp8 = Transformer Engine FP8).")
    optimizer: Literal["adam"] = Field(default="adam", description="Optimizer (mixed-precision Adam/AdamW).")
    grad_dtype: Literal["fp32", "bf16"] = Field(
        default="fp32", description="Gradient accumulation/reduction dtype (Megatron main grads are fp32)."
    )
    flash_attention: bool = Field(
        strict=True,  # a JSON true/false only: 0, 1 and "yes" are refused
        default=True,
        description="Fused attention (no s^2 activations); false = 2021-era explicit softmax.",
    )
    attention_kernel: AttentionKernel | None = Field(
        default=None,
        description="Fused-attention kernel generation: fa3 (FlashAttention-3 / cuDNN fused attention on Hopper and "
        "newer), fa2 (FlashAttention-2: flash-attn 2.x, PyTorch SDPA's flash backend, stacks before mid-2024); "
        "unset: the framework's default (optimizer/frameworks/capabilities.py). Ampere runs fa2 either way.",
    )
    cuda_graphs: CudaGraphs | None = Field(
        default=None,
        description="CUDA graphs the stack captures: none; layers (per-layer graphs of the static parts: attention, "
        "MoE router and preprocess; Megatron --cuda-graph-impl transformer_engine | local), under which dropless MoE "
        "experts still run eagerly; full_iteration (Megatron --cuda-graph-impl full_iteration with padded expert "
        "capacity): no host launches at all. Unset: none. Priced for MoE layers only (costmodel MOE_EAGER_HOST_S).",
    )
    framework: FrameworkChoice = Field(
        default="megatron",
        description="Training framework the plan will run on (frameworks/capabilities.py): megatron, deepspeed, "
        "torchtitan, or auto (plan for each, keep the best).",
    )
    framework_version: str | None = Field(
        default=None,
        min_length=1,
        max_length=32,
        description="The framework's release: a NeMo / Megatron-Bridge container YY.MM[.NN] or a Megatron-Core "
        "version (0.14.0, core_r0.14.0) for megatron, the package version for torchtitan and deepspeed "
        "(optimizer/frameworks/releases.py). Its defaults (attention kernel, float8 recipe) and release terms "
        "apply; an unknown or newer release is priced as the nearest known one and named in the estimate's stack "
        "novelty. Unset: the framework's current defaults, the fitted constants.",
    )
    fp8_recipe: Fp8Recipe | None = Field(
        default=None,
        description="torchtitan's float8 scaling recipe (torchao Float8Linear): tensorwise (one scale per tensor; "
        "torchao's default, the only one torchtitan offered before 2026-04) or rowwise (one scale per row, "
        "communication in bf16; torchtitan's default since 6348d93, 2026-04-27). Needs precision fp8 and framework "
        "torchtitan; unset: the stated release's default (optimizer/frameworks/releases.py), else tensorwise.",
    )
    fp8_param_gather: bool = Field(
        strict=True,  # a JSON true/false only: 0, 1 and "yes" are refused
        default=False,
        description="FP8 primary weights (Megatron --fp8-param-gather, set by Megatron-Bridge's FP8 recipes): no "
        "bf16 copy of the weights, parameters all-gathered in FP8. Needs precision fp8.",
    )
    precision_aware_optimizer: bool = Field(
        strict=True,  # a JSON true/false only: 0, 1 and "yes" are refused
        default=False,
        description="Megatron --use-precision-aware-optimizer (TE FusedAdam; NeMo's BF16 performance recipes set "
        "it): the fp32 master weight is kept as the 16 bits the bf16 weight lacks (store_param_remainders), 2 B "
        "per parameter instead of 4. Needs precision bf16.",
    )
    fused_loss: bool | None = Field(
        strict=True,  # a JSON true/false only: 0, 1 and "yes" are refused
        default=None,
        description="The loss is a fused cross entropy that never holds fp32 logits beside their gradient "
        "(Megatron's vocab-parallel loss, flash-attn's, torchtitan with compile.components including loss); "
        "false: the unfused fp32 loss; unset: the framework's default.",
    )
    objective: Literal["step_time", "cost", "goodput"] = Field(
        default="step_time",
        description="step_time: seconds per step; cost: price per step (GPUs used x their pool's price_per_gpu_hour"
        " x step time), which may leave GPUs idle or pick cheaper pools; goodput: wall seconds per useful step "
        "after checkpoints, failures and restarts (step time / goodput fraction, optimizer/costmodel/goodput.py), "
        "which may leave nodes free as spares or pick a layout with cheaper checkpoints.",
    )

    @model_validator(mode="after")
    def _fp8_params(self) -> TrainingWorkload:
        if self.fp8_recipe is not None and (self.precision != "fp8" or self.framework != "torchtitan"):
            raise DomainError(
                "workload.fp8_recipe",
                "a torchao float8 recipe needs precision fp8 and framework torchtitan "
                f"(got {self.precision}, {self.framework})",
            )
        if self.framework_version is not None and self.framework == "auto":
            raise DomainError("workload.framework_version", "a release belongs to one framework: name it (not auto)")
        if self.framework_version is not None and RELEASE_PATTERN.match(self.framework_version.strip()) is None:
            raise DomainError(
                "workload.framework_version",
                "must be a release number: a container YY.MM[.NN] or Megatron-Core X.Y.Z (megatron), or a package "
                "version X.Y[.Z] "
                f"(got {self.framework_version!r})",
            )
        if self.fp8_param_gather and self.precision != "fp8":
            raise DomainError(
                "workload.fp8_param_gather", f"FP8 primary weights need precision fp8 (got {self.precision})"
            )
        if self.precision_aware_optimizer and self.precision != "bf16":
            # TE FusedAdam stores remainders only for bf16 parameters (fused_adam.py store_param_remainders); under
            # FP8 current scaling Megatron keeps its own fp32 master copy (optimizer_config.py
            # use_precision_aware_optimizer_no_fp8_or_ds_fp8).
            raise DomainError(
                "workload.precision_aware_optimizer",
                f"the master-weight remainders need bf16 parameters, precision bf16 (got {self.precision})",
            )
        return self

    @property
    def tokens_per_step(self) -> int:
        """Tokens consumed per optimizer step."""
        return self.global_batch_size * self.seq_len


def _mode_required(schema: dict[str, Any]) -> None:
    """Only a body naming mode "inference" is read as one, so the document marks the field required."""
    schema["required"] = [*schema.get("required", []), "mode"]


class InferenceWorkload(BaseModel):
    """Serving: a batch of concurrent sequences, each with a prompt and generated tokens."""

    model_config = ConfigDict(frozen=True, extra="forbid", json_schema_extra=_mode_required)

    mode: Literal["inference"] = "inference"
    prompt_len: int = Field(ge=1, le=100_000_000, description="Prompt tokens per sequence.")
    output_len: int = Field(ge=1, le=100_000_000, description="Generated tokens per sequence.")
    batch: int = Field(default=1, ge=1, le=1_000_000, description="Concurrent sequences per model replica.")
    objective: Literal["latency", "throughput", "gpus", "cost", "max_rate"] = Field(
        default="latency",
        description="latency: time per output token; throughput: tokens/s per GPU (both at `batch` concurrent "
        "sequences). With a request rate and latency targets (an SLA plan): gpus: fewest GPUs that serve `rate`; "
        "cost: cheapest pools' price per hour for `rate`; max_rate: most requests/s the allowed GPUs serve.",
    )
    precision: Precision = Field(default="bf16", description="GEMM precision (fp8: FP8 weights and GEMMs).")
    weight_dtype: Literal["bf16", "fp16", "fp8", "int4"] | None = Field(
        default=None,
        description="Stored weight type; None = the GEMM precision. int4 = weight-only 4-bit (AWQ/GPTQ Marlin "
        "kernels: 0.5 byte per weight, GEMMs in 16-bit).",
    )
    kv_cache_dtype: Literal["bf16", "fp16", "fp8"] = Field(default="bf16", description="KV cache element type.")
    prompt_len_cv: float = Field(
        default=0.0,
        ge=0,
        le=10,
        description="Prompt length spread: standard deviation / mean (0 = every prompt prompt_len tokens).",
    )
    output_len_cv: float = Field(
        default=0.0,
        ge=0,
        le=10,
        description="Output length spread: standard deviation / mean (0 = every output output_len tokens).",
    )
    engine: EngineName = Field(
        default="vllm", description="Serving engine (optimizer/costmodel/serving_engines.py): vllm, sglang or trtllm."
    )
    rate: float | None = Field(
        default=None,
        gt=0,
        le=1_000_000,
        description="Requests per second the whole fleet must serve (SLA plan); estimate reports TTFT/TPOT "
        "percentiles at this rate (Poisson arrivals, spread over the configuration's replicas).",
    )
    ttft_ms: float | None = Field(
        default=None, gt=0, le=3_600_000, description="Time-to-first-token target, p90, milliseconds."
    )
    tpot_ms: float | None = Field(
        default=None, gt=0, le=100_000, description="Time-per-output-token target, mean, milliseconds."
    )
    max_seqs: int | None = Field(
        default=None, ge=1, le=1_000_000, description="Most sequences per replica iteration; None = engine default."
    )
    max_batched_tokens: int | None = Field(
        default=None, ge=16, le=10_000_000, description="Token budget per iteration; None = engine default."
    )
    memory_fraction: float | None = Field(
        default=None, gt=0, le=1, description="Engine memory fraction; None = engine default."
    )
    concurrency: int | None = Field(
        default=None,
        ge=1,
        le=1_000_000,
        description="Closed loop: concurrent users over the configuration's replicas, each sending its next request "
        "when the previous one finishes (estimate reports TTFT/TPOT percentiles at that load); not with rate.",
    )
    chunked_prefill: bool | None = Field(
        strict=True,
        default=None,
        description="Split long prompts into chunks of the per-iteration token budget (vLLM "
        "--enable-chunked-prefill, SGLang --chunked-prefill-size > 0, TensorRT-LLM enable_chunked_prefill); None = "
        "on (the engines' default for this planner's budgets).",
    )
    cuda_graphs: bool | None = Field(
        strict=True,
        default=None,
        description="Decode iterations replay captured CUDA graphs (false: vLLM --enforce-eager, SGLang "
        "--disable-cuda-graph, TensorRT-LLM cuda_graph_config null); None = on.",
    )
    cuda_graph_max_batch: int | None = Field(
        default=None,
        ge=1,
        le=1_000_000,
        description="Largest decode batch per rank captured in a CUDA graph (vLLM max_cudagraph_capture_size, SGLang "
        "--cuda-graph-max-bs, TensorRT-LLM cuda_graph_config.max_batch_size), sequences; None = engine default "
        "(optimizer/costmodel/serving_engines.py).",
    )
    trtllm_backend: Literal["pytorch", "tensorrt"] | None = Field(
        default=None,
        description="TensorRT-LLM release line: pytorch (the PyTorch backend, default since v0.19) or tensorrt (a "
        "built TensorRT engine, the only backend before); None = pytorch. Ignored by other engines.",
    )
    spec_tokens: int = Field(
        default=0,
        ge=0,
        le=16,
        description="Speculative decoding: draft tokens per sequence per iteration (MTP / EAGLE steps: SGLang "
        "--speculative-num-steps, vLLM num_speculative_tokens, TensorRT-LLM num_nextn_predict_layers); 0 = off.",
    )
    acceptance_rate: float | None = Field(
        default=None,
        ge=0,
        lt=1,
        description="Speculative decoding: probability that a drafted token is accepted (each in turn); required "
        "with spec_tokens (optimizer/costmodel/speculative.py).",
    )
    engine_version: str | None = Field(
        default=None,
        max_length=32,
        pattern=r"^v?[0-9]+(\.[0-9]+){0,3}([.+-]?[A-Za-z0-9]+)*$",
        description="Engine release, e.g. 0.11.0: its defaults as released (optimizer/costmodel/engine_releases.py); "
        "a release the table lacks is priced as the nearest one and its intervals widen. None = the newest defaults.",
    )
    disaggregation: Literal["auto", "off", "on"] = Field(
        default="auto",
        description="SLA plans: separate prefill and decode instances (on), one kind of replica (off), or "
        "whichever serves the rate cheaper (auto).",
    )
    workload_trace: tuple[TraceRequest, ...] | None = Field(
        default=None,
        min_length=1,
        description="The user's own requests, each with its prompt and output tokens and, where timed, its arrival "
        "(optimizer/spec/workload_trace.py: a JSONL text as Mooncake / aiperf mooncake_trace or `vllm bench serve "
        "--save-result --save-detailed` write it, or a list of {arrival_s, input_tokens, output_tokens}). The "
        "latency simulation runs these requests: at their own arrival times, or at `rate` / by `concurrency` users "
        "when given. Unset prompt_len / output_len become the trace's means.",
    )
    length_distribution: LengthDistribution | None = Field(
        default=None,
        description="A named dataset's measured prompt and output length distribution "
        "(optimizer/costmodel/request_lengths.py, each with its source), scaled to prompt_len and output_len as its "
        "means; random and sonnet as `vllm bench serve` draws them. Unset: gamma lengths at prompt_len_cv / "
        "output_len_cv.",
    )
    burstiness: float | None = Field(
        default=None,
        gt=0,
        le=1000,
        description="Open-loop arrivals at `rate`: gamma inter-arrival times of shape `burstiness` (`vllm bench "
        "serve --burstiness`; 1 = Poisson, the default; below 1 burstier).",
    )

    @model_validator(mode="before")
    @classmethod
    def _trace_text(cls, data: Any) -> Any:
        """A trace given as JSONL text is read here; prompt_len / output_len default to the trace's means."""
        if not isinstance(data, dict) or data.get("workload_trace") is None:
            return data
        trace = data["workload_trace"]
        if isinstance(trace, str):
            data = {**data, "workload_trace": parse_trace(trace)}
            trace = data["workload_trace"]
        if isinstance(trace, list | tuple) and trace:
            for key, attr in (("prompt_len", "input_tokens"), ("output_len", "output_tokens")):
                mean = _trace_mean(trace, attr)
                if data.get(key) is None and mean is not None:
                    data = {**data, key: mean}
        return data

    @field_validator("workload_trace", mode="after")
    @classmethod
    def _trace_order(cls, v: tuple[TraceRequest, ...] | None) -> tuple[TraceRequest, ...] | None:
        return None if v is None else normalized(list(v), "workload_trace")

    @model_validator(mode="after")
    def _lengths_source(self) -> InferenceWorkload:
        named = "workload_trace" if self.workload_trace is not None else "length_distribution"
        if self.workload_trace is not None and self.length_distribution is not None:
            raise DomainError(
                "workload.length_distribution", "a trace carries its own lengths: give a trace or a dataset, not both"
            )
        if (self.workload_trace is not None or self.length_distribution is not None) and (
            self.prompt_len_cv or self.output_len_cv
        ):
            raise DomainError(
                "workload.prompt_len_cv", f"{named} sets the length spread: no prompt_len_cv / output_len_cv with it"
            )
        if self.burstiness is not None and self.rate is None:
            raise DomainError("workload.burstiness", "shapes open-loop arrivals at a rate: give rate")
        return self

    @property
    def replays_trace(self) -> bool:
        """A timed trace and no rate or users of its own: the simulation sends the trace's requests at its times."""
        t = self.workload_trace
        return t is not None and t[0].arrival_s is not None and self.rate is None and self.concurrency is None

    @model_validator(mode="after")
    def _sla_fields(self) -> InferenceWorkload:
        if self.spec_tokens and self.acceptance_rate is None:
            raise ValueError(
                "acceptance_rate: speculative decoding (spec_tokens > 0) needs the drafts' acceptance rate"
            )
        if self.objective in ("gpus", "cost") and self.rate is None:
            raise ValueError(f"rate: objective {self.objective} plans GPUs for a request rate; give rate")
        if self.objective == "max_rate" and self.rate is not None:
            raise ValueError("rate: objective max_rate finds the rate; do not give one")
        if self.concurrency is not None and self.rate is not None:
            raise ValueError("concurrency: a closed loop of users sets its own rate; give rate or concurrency")
        if self.rate is not None and self.objective in ("latency", "throughput"):
            raise ValueError("objective: a request rate is planned with objective gpus, cost or max_rate")
        if (self.ttft_ms is not None or self.tpot_ms is not None) and self.objective in ("latency", "throughput"):
            raise ValueError(
                "objective: latency targets (ttft_ms, tpot_ms) are planned with objective gpus or cost (with a rate) "
                "or max_rate"
            )
        return self

    @property
    def sla_plan(self) -> bool:
        """A fleet plan for a request rate (or the most rate) under latency targets."""
        return self.objective in ("gpus", "cost", "max_rate")

    @property
    def weight_bytes(self) -> float:
        """Bytes per stored weight."""
        return 0.5 if self.weight_dtype == "int4" else BYTES[self.weight_dtype or self.precision]

    @property
    def embedding_bytes(self) -> float:
        """Bytes per stored embedding and LM-head weight: quantized checkpoints keep both in 16 bits (vLLM's
        Fp8Config quantizes linear layers only, ParallelLMHead keeps UnquantizedEmbeddingMethod; TensorRT Model
        Optimizer's FP8/INT4 configs disable '*lm_head*'), so only a 32-bit model stores more."""
        return max(2.0, float(BYTES[self.precision]))


def _trace_mean(trace: list[Any] | tuple[Any, ...], attr: str) -> int | None:
    """The trace's mean of `attr` (records or dicts), or None where a request lacks a valid one (pydantic then names
    it, with its place in the trace)."""
    values: list[int] = []
    for r in trace:
        v = r.get(attr) if isinstance(r, dict) else getattr(r, attr, None)
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            return None
        values.append(v)
    return max(1, round(sum(values) / len(values)))


def _mode(value: Any) -> Any:
    """The workload's mode; a mapping without one is training (its documented default)."""
    if isinstance(value, dict):
        return value.get("mode", "training")
    return getattr(value, "mode", None)


Workload = Annotated[
    Annotated[TrainingWorkload, Tag("training")] | Annotated[InferenceWorkload, Tag("inference")],
    Discriminator(
        _mode, custom_error_type="workload_mode", custom_error_message="mode must be 'training' or 'inference'"
    ),
]

BYTES: dict[str, int] = {"bf16": 2, "fp16": 2, "fp8": 1, "fp32": 4}
