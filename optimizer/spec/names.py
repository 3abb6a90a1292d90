"""The one list of the training frameworks and serving engines the planner knows, and what `auto` means.

Everything that names a framework or an engine (workloads, validation, cost terms, exports, the API's and CLI's
choices, run logs) reads these lists; capabilities.py and costmodel/framework_runtime.py describe each entry."""

from __future__ import annotations

from typing import Literal

FrameworkName = Literal["megatron", "deepspeed", "torchtitan"]
FRAMEWORKS: tuple[FrameworkName, ...] = ("megatron", "deepspeed", "torchtitan")
FrameworkChoice = Literal["megatron", "deepspeed", "torchtitan", "auto"]
"""A workload's framework: one of FRAMEWORKS, or `auto` (the planner plans for each and keeps the best)."""
AttentionKernel = Literal["fa3", "fa2"]
"""Fused-attention kernel generation: fa3 = FlashAttention-3 class (FlashAttention-3, cuDNN fused attention on
Hopper and newer), fa2 = FlashAttention-2 class (the flash-attn 2.x package, PyTorch SDPA's flash backend, and the
stacks before FlashAttention-3 of July 2024). Efficiencies in costmodel/constants.py FLASH_ATTENTION_EFFICIENCY."""

AUTO_PRICED_AS: FrameworkName = "megatron"
"""The framework an `auto` workload is priced with wherever one framework must be named before the planner has
chosen (an estimate, the search space's bounds): Megatron-Core, which runs every knob the planner searches."""

EngineName = Literal["vllm", "sglang", "trtllm"]
ENGINES: tuple[EngineName, ...] = ("vllm", "sglang", "trtllm")
ToolName = FrameworkName | EngineName
"""Anything a plan exports to: a training framework or a serving engine."""
TOOLS: tuple[ToolName, ...] = (*FRAMEWORKS, *ENGINES)
SchedulerName = Literal["slurm", "k8s"]
"""Where a training plan's job is submitted, on its placement's hosts: a Slurm batch script or a Kubernetes JobSet
(optimizer/exports/job_scripts.py)."""
SCHEDULERS: tuple[SchedulerName, ...] = ("slurm", "k8s")
ExportName = ToolName | SchedulerName
"""Anything `--export` names: a framework, an engine, or a scheduler."""
EXPORTS: tuple[ExportName, ...] = (*TOOLS, *SCHEDULERS)


def priced_framework(choice: FrameworkChoice) -> FrameworkName:
    """The framework a workload's `framework` field is priced with: itself, or AUTO_PRICED_AS for `auto`."""
    return AUTO_PRICED_AS if choice == "auto" else choice


def named_framework(choice: FrameworkChoice) -> FrameworkName | None:
    """The framework the user named, or None for `auto` (the planner chooses)."""
    return None if choice == "auto" else choice
