"""What the cluster is asked to do: train (a global batch per step) or serve (prompts and outputs)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from optimizer.frameworks import FrameworkChoice

Precision = Literal["bf16", "fp16", "fp8"]


class TrainingWorkload(BaseModel):
    """One optimizer step of mixed-precision Adam training."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: Literal["training"] = "training"
    global_batch_size: int = Field(ge=1, le=100_000_000, description="Sequences per optimizer step.")
    seq_len: int = Field(ge=1, le=100_000_000, description="Tokens per sequence.")
    precision: Precision = Field(default="bf16", description="GEMM precision (fp8 = Transformer Engine FP8).")
    optimizer: Literal["adam"] = Field(default="adam", description="Optimizer (mixed-precision Adam/AdamW).")
    grad_dtype: Literal["fp32", "bf16"] = Field(
        default="fp32", description="Gradient accumulation/reduction dtype (Megatron main grads are fp32)."
    )
    flash_attention: bool = Field(
        default=True, description="Fused attention (no s^2 activations); false = 2021-era explicit softmax."
    )
    framework: FrameworkChoice = Field(
        default="megatron",
        description="Training framework the plan will run on (optimizer/frameworks.py): megatron, deepspeed, "
        "torchtitan, or auto (plan for each, keep the best).",
    )
    objective: Literal["step_time", "cost"] = Field(
        default="step_time",
        description="step_time: seconds per step; cost: price per step (GPUs used x their pool's price_per_gpu_hour"
        " x step time), which may leave GPUs idle or pick cheaper pools.",
    )

    @property
    def tokens_per_step(self) -> int:
        """Tokens consumed per optimizer step."""
        return self.global_batch_size * self.seq_len


class InferenceWorkload(BaseModel):
    """Serving: a batch of concurrent sequences, each with a prompt and generated tokens."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: Literal["inference"] = "inference"
    prompt_len: int = Field(ge=1, le=100_000_000, description="Prompt tokens per sequence.")
    output_len: int = Field(ge=1, le=100_000_000, description="Generated tokens per sequence.")
    batch: int = Field(default=1, ge=1, le=1_000_000, description="Concurrent sequences per model replica.")
    objective: Literal["latency", "throughput"] = Field(
        default="latency", description="latency: time per output token; throughput: tokens/s per GPU."
    )
    precision: Precision = Field(default="bf16", description="Weight and GEMM precision.")
    kv_cache_dtype: Literal["bf16", "fp16", "fp8"] = Field(default="bf16", description="KV cache element type.")


Workload = Annotated[TrainingWorkload | InferenceWorkload, Field(discriminator="mode")]

BYTES: dict[str, int] = {"bf16": 2, "fp16": 2, "fp8": 1, "fp32": 4}
