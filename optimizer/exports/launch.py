"""One plan, exported to the launchers people use: Megatron-LM arguments, a DeepSpeed config, a torchtitan
config, vLLM, SGLang and TensorRT-LLM serve arguments (an SLA fleet: one command per replica group, with the
engines' disaggregated prefill/decode modes). Option names are limited to those each tool documents
(optimizer/exports/export_options.json); what a tool cannot express is said in `notes`."""

from __future__ import annotations

from optimizer.costmodel.result import Estimate
from optimizer.errors import DomainError, UnknownNameError
from optimizer.exports.deepspeed import deepspeed_export
from optimizer.exports.engine_options import LaunchRelease, launch_release
from optimizer.exports.export_record import Export, flags
from optimizer.exports.megatron import megatron_export, megatron_layout, moe_layer_pattern
from optimizer.exports.serving import front_end_export, sglang_export, trtllm_export, vllm_export
from optimizer.exports.torchtitan import torchtitan_export
from optimizer.frameworks.capabilities import check_model, check_workload, unsupported_knob
from optimizer.frameworks.capabilities import framework as framework_spec
from optimizer.search.fleet_result import FleetPlan, ReplicaShape
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.names import ENGINES, FRAMEWORKS, TOOLS, ToolName, named_framework
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.stage_layers import LayerRules
from optimizer.spec.workload import InferenceWorkload, TrainingWorkload

# Callers import the export record and the Megatron layout helpers from here (their homes: export_record.py,
# megatron.py).
__all__ = [
    "SERVING_TOOLS",
    "TOOLS",
    "TRAINING_TOOLS",
    "Export",
    "export",
    "export_fleet",
    "megatron_layout",
    "moe_layer_pattern",
]

Tool = ToolName
SERVING_TOOLS = ENGINES
TRAINING_TOOLS = FRAMEWORKS


def export(
    tool: str,
    model: ModelSpec,
    workload: TrainingWorkload | InferenceWorkload,
    c: ParallelConfig,
    model_ref: str = "MODEL",
    framework: str | None = None,
    estimate: Estimate | None = None,
) -> Export:
    """Export a planned configuration (layers_per_stage filled) for `tool`. A training plan exports to any
    framework that can run every knob it uses; one it cannot run is an error naming the knob (the plan's own
    `framework`, or the workload's, is named in the message). With the plan's `estimate`, the notes say what the
    run should measure: the predicted step time (TTFT / TPOT) with its 80% interval and basis."""
    out = _export(tool, model, workload, c, model_ref, framework)
    if estimate is not None:
        out.notes.append(prediction_note(estimate))
    return out


def prediction_note(e: Estimate) -> str:
    """What the run should measure, with how sure the prediction is."""
    if e.step_time_interval_s is not None:
        lo, hi = e.step_time_interval_s
        head = f"predicted step time {e.step_time_s:.3g} s (80% interval {lo:.3g}-{hi:.3g} s)"
    elif e.tpot_s is not None and e.tpot_interval_s is not None:
        lo, hi = e.tpot_interval_s
        head = f"predicted TPOT {1000 * e.tpot_s:.3g} ms (80% interval {1000 * lo:.3g}-{1000 * hi:.3g} ms)"
    else:
        head = f"predicted step time {e.step_time_s:.3g} s (no interval)"
    return head + (f"; {e.interval_basis}" if e.interval_basis else "")


def _export(
    tool: str,
    model: ModelSpec,
    workload: TrainingWorkload | InferenceWorkload,
    c: ParallelConfig,
    model_ref: str,
    framework: str | None,
) -> Export:
    if tool not in TOOLS:
        raise UnknownNameError("export", tool, TOOLS)
    if isinstance(workload, TrainingWorkload) and tool in TRAINING_TOOLS:
        planned_for = framework or named_framework(workload.framework)
        check_model(framework_spec(tool), model, "export")
        check_workload(framework_spec(tool), workload, "export")
        bad = unsupported_knob(framework_spec(tool), c)
        if bad is not None:
            knob, text = bad
            origin = f" (the plan was made for {planned_for})" if planned_for and planned_for != tool else ""
            raise DomainError(
                f"export.{knob}", f"{text} is not available in {tool}{origin}; plan again with framework={tool}"
            )
    training = isinstance(workload, TrainingWorkload)
    if training and tool in SERVING_TOOLS:
        raise DomainError(
            "export", f"{tool} is a serving engine; a training plan exports to {', '.join(TRAINING_TOOLS)}"
        )
    if not training and tool in TRAINING_TOOLS:
        raise DomainError(
            "export", f"{tool} is a training framework; a serving plan exports to {', '.join(SERVING_TOOLS)}"
        )
    layers = c.layers_per_stage or _default_layers(model, c, tool)
    if isinstance(workload, TrainingWorkload):
        if tool == "megatron":
            return megatron_export(model, workload, c, layers, model_ref)
        if tool == "deepspeed":
            return deepspeed_export(model, workload, c, layers)
        return torchtitan_export(model, workload, c, layers)
    # The model drafts with its own MTP head (speculative_flags.py): one it trains with, or DeepSeek's MLA family,
    # whose checkpoints ship the NextN head (deepseek-ai/DeepSeek-V3 config.json num_nextn_predict_layers 1).
    mtp = model.mtp_layers > 0 or model.mla is not None
    if tool == "vllm":
        return vllm_export(workload, c, layers, model_ref, mtp)
    if tool == "sglang":
        return sglang_export(workload, c, model_ref, mtp)
    return trtllm_export(workload, c, model_ref, mtp)


def _default_layers(model: ModelSpec, c: ParallelConfig, tool: str) -> list[int]:
    """Layers per rank of a configuration that gives none: the split `validate` uses for that framework."""
    if tool in TRAINING_TOOLS:
        rules = LayerRules.of(model, c.pp, c.vp, framework_spec(tool).virtual_stage_layout)
        split = rules.default_split()
        if split is not None:
            return split
    return c.stage_layers(model.num_layers)


def export_fleet(
    tool: str, model: ModelSpec, w: InferenceWorkload, fleet: FleetPlan, model_ref: str = "MODEL"
) -> list[Export]:
    """One launch per replica group of an SLA fleet, with the engine's limits set to the plan's; a
    disaggregated fleet adds the engine's prefill/decode roles and how the front end joins them."""
    if tool not in SERVING_TOOLS:
        raise DomainError("export", f"an SLA fleet exports to {', '.join(SERVING_TOOLS)} (got {tool!r})")
    out: list[Export] = []
    for g in fleet.groups:
        s = g.shape
        c = ParallelConfig(tp=s.tp, pp=s.pp, dp=s.dp, ep=s.ep, etp=1 if s.ep > 1 else None, ep_comm_overlap=s.overlap)
        exp = export(tool, model, group_workload(w, s), c, model_ref)
        extra = _role_flags(tool, s.role, launch_release(tool, w))
        text, names = flags(extra)
        content = exp.content + (" \\\n  " + text if extra else "")
        notes = [f"{g.count} x {s.role} on pool {s.pool} ({s.gpu}), {s.gpus} GPUs each", *exp.notes]
        out.append(exp.model_copy(update={"content": content, "options": exp.options + names, "notes": notes}))
    if fleet.mode == "disaggregated":
        out.append(front_end_export(tool, fleet))
    return out


def group_workload(w: InferenceWorkload, s: ReplicaShape) -> InferenceWorkload:
    """The workload one replica group was priced with: its own sequence limit (per attention rank), token budget and
    memory share, whatever the fleet's workload says (its batch is the SLA's default 1, its max_seqs the user's
    bound the search stayed within)."""
    if s.max_seqs < 1 or s.max_batched_tokens < 1:
        raise DomainError("fleet.groups", f"a {s.role} group on {s.pool} has no sequence limit or token budget")
    return w.model_copy(
        update={
            "batch": s.max_seqs,
            "max_seqs": s.max_seqs,
            "max_batched_tokens": s.max_batched_tokens,
            "memory_fraction": s.memory_fraction,
        }
    )


def _role_flags(tool: str, role: str, rel: LaunchRelease) -> list[tuple[str, object | None]]:
    """A disaggregated group's role in the engine's own words: vLLM's NixlConnector (kv_both: the proxy decides
    the direction; docs features/disagg_prefill), SGLang's --disaggregation-mode prefill | decode over Mooncake
    (server_args.py); TensorRT-LLM's roles are in the front end's YAML."""
    if role == "replica":
        return []
    if tool == "vllm":
        rel.require("--kv-transfer-config", "disaggregation", f"a {role} instance")
        return [("--kv-transfer-config", '\'{"kv_connector":"NixlConnector","kv_role":"kv_both"}\'')]
    if tool == "sglang":
        rel.require("--disaggregation-mode", "disaggregation", f"a {role} instance")
        return [("--disaggregation-mode", role), ("--disaggregation-transfer-backend", "mooncake")]
    return []
