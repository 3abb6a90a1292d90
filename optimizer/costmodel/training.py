"""Step time and memory of one training configuration [formulas A-D]: the stages' costs (stage.py) run through
the pipeline schedule, and the step's FLOPs."""

from __future__ import annotations

from optimizer.costmodel.compute import layer_flops
from optimizer.costmodel.constants import FRAMEWORK_FACTOR, FRAMEWORK_FACTOR_DEFAULT
from optimizer.costmodel.memory import inflight_microbatches
from optimizer.costmodel.placed_fabric import PlacedFabric
from optimizer.costmodel.result import (
    MFU_TRAINING,
    Estimate,
    MemoryBreakdown,
    StageEstimate,
    StepBreakdown,
    memory_overrun_gb,
    memory_shortfall,
)
from optimizer.costmodel.stage import CostContext, StageCost, layout_stages
from optimizer.costmodel.terms.pipeline import pipeline_fill
from optimizer.frameworks.validation import Layout
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.gpu_catalog import has_flash_attention
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import TrainingWorkload

GB = 1e9


def pipeline_time(c: ParallelConfig, m: int, stages: list[StageCost]) -> tuple[float, float]:
    """(pipeline time, steady-state part) of one step: m x the slowest stage plus the fill and drain
    (terms/pipeline.py pipeline_fill) [A22 §5 eq. 2; N21 §2.2.2; Q23 §3]."""
    times = [s.time for s in stages]
    steady = m * max(times)
    fill = pipeline_fill(c.schedule, c.vp, times, [s.wgrad for s in stages])
    return steady + fill, steady


def step_time(c: ParallelConfig, m: int, stages: list[StageCost]) -> tuple[float, list[float]]:
    """Step time and each stage's finishing time.

    Later stages finish their last backward earlier (cool-down), so their DP sync and optimizer step start
    earlier: stage i gains the backward time of the stages before it, over v chunks [MLM schedules.py].
    """
    t_pipe, _ = pipeline_time(c, m, stages)
    ends = []
    slack = 0.0
    for s in stages:
        ends.append(t_pipe - slack + s.end)
        slack += s.bwd / c.vp
    return max(ends), ends


def estimate_training(
    model: ModelSpec,
    cluster: ClusterSpec,
    w: TrainingWorkload,
    c: ParallelConfig,
    layout: Layout,
    fabric: PlacedFabric | None = None,
) -> Estimate:
    """Estimate one training step; `fabric`: per stage, what a placement gives its groups where that is worse than
    the tiers assume (costmodel/placed_fabric.py; None: the tiers' own assumption)."""
    m = layout.microbatches
    ctx = CostContext(model, cluster, w, c, m)
    stages = layout_stages(ctx, layout.stage_pools, layout.stage_layers, fabric)
    step, ends = step_time(c, m, stages)
    crit = max(range(c.pp), key=lambda i: ends[i])
    slow = max(range(c.pp), key=lambda i: stages[i].time)
    bd = StepBreakdown(**{k: m * v for k, v in stages[slow].parts.items()})
    bd.dp_comm = stages[crit].dp
    bd.zero_gather = stages[crit].zero
    bd.optimizer = stages[crit].opt
    accounted = bd.forward + bd.backward + bd.recompute + bd.tp_comm + bd.cp_comm + bd.ep_comm + bd.pp_comm
    accounted += bd.offload + bd.launch
    bd.bubble = max(0.0, step - accounted - bd.dp_comm - bd.zero_gather - bd.optimizer)

    tokens = w.global_batch_size * w.seq_len
    model_flops, hw_flops = _step_flops(model, ctx.w, c)
    peak_sum = sum(cluster.gpu_of(p).bf16_tflops * 1e12 * c.gpus_per_stage for p in layout.stage_pools)
    stage_out = []
    for i, s in enumerate(stages):
        pool = layout.stage_pools[i]
        acts = inflight_microbatches(c, i, m, layout.stage_layers[i]) * s.act_per_mb
        total = s.static + acts
        mem = MemoryBreakdown.model_construct(
            weights=s.weights / GB,
            gradients=s.grads / GB,
            optimizer=s.optim / GB,
            embedding_lm_head=s.emb / GB,
            activations=acts / GB,
            kv_cache=0.0,
            transient=s.transient / GB,
            reserve=s.reserve / GB,
            total=total / GB,
            capacity=s.capacity / GB,
        )
        stage_out.append(
            StageEstimate.model_construct(
                index=i,
                pool=pool.name,
                gpu=cluster.gpu_of(pool).name,
                layers=layout.stage_layers[i],
                memory_gb=mem,
                fits=total <= s.capacity,
                time_s=m * s.time,
                forward_s=s.fwd,
                backward_s=s.bwd,
            )
        )
    reason = memory_shortfall(stage_out)
    return Estimate(
        mode="training",
        feasible=reason is None,
        reason=reason,
        gpus=c.gpus,
        step_time_s=step,
        tokens_per_s=tokens / step,
        mfu=model_flops / (step * peak_sum),
        hfu=hw_flops / (step * peak_sum),
        mfu_convention=MFU_TRAINING,
        microbatches=m,
        stages=stage_out,
        breakdown=bd,
        peak_memory_gb=max(s.memory_gb.total for s in stage_out),
        memory_overrun_gb=memory_overrun_gb(stage_out),
        notes=_notes(cluster, layout, bd.launch),
    )


def _step_flops(model: ModelSpec, w: TrainingWorkload, c: ParallelConfig) -> tuple[float, float]:
    """Model FLOPs (forward + 2x backward, full attention as Megatron-Core counts it) and hardware FLOPs (with
    the recompute forward) per step [MLM training.py num_floating_point_operations; K22 App. A]."""
    s = w.seq_len
    dense, moe = layer_flops(model, False), layer_flops(model, True)
    n_moe = model.num_moe_layers
    n_dense = model.num_layers - n_moe
    layer_fwd = n_dense * (dense.gemm + dense.attn_per_ctx * s) + n_moe * (moe.gemm + moe.attn_per_ctx * s)
    logits = 2 * model.hidden_size * model.vocab_size
    if model.mtp_layers:  # each MTP module: a layer, its projection and its logits [MLM num_floating_point_operations]
        mtp = moe if model.mtp_layer_is_moe else dense
        layer_fwd += model.mtp_layers * (mtp.gemm + mtp.attn_per_ctx * s + 2 * 2 * model.hidden_size**2)
        logits *= 1 + model.mtp_layers
    tokens = w.global_batch_size * s
    model_flops = 3 * tokens * (layer_fwd + logits)
    extra = 0.0
    if c.recompute == "full":
        extra = tokens * layer_fwd
    else:
        mods = c.modules
        if "core_attn" in mods and not w.flash_attention:
            extra += tokens * (n_dense * dense.attn_per_ctx + n_moe * moe.attn_per_ctx) * s
        if "mla_up_proj" in mods:
            extra += tokens * (n_dense * dense.mla_up + n_moe * moe.mla_up)
        if "mlp" in mods:
            extra += tokens * n_dense * dense.mlp
        if "moe" in mods:
            extra += tokens * n_moe * moe.mlp
        elif "shared_experts" in mods:
            extra += tokens * n_moe * moe.shared
    return model_flops, model_flops + extra


def _notes(cluster: ClusterSpec, layout: Layout, launch_s: float) -> list[str]:
    notes = ["MFU counts model FLOPs as Megatron-Core does (full s^2 attention, no recompute), against BF16 peak."]
    if launch_s > 0:
        notes.append(
            f"MoE layers run eagerly: {launch_s:.2f} s of the step waits on the host's kernel launches after each "
            "dispatcher sync; full-iteration CUDA graphs (cuda_graphs full_iteration, with padded expert capacity) "
            "remove it."
        )
    gpus = {cluster.gpu_of(p).name: cluster.gpu_of(p) for p in layout.stage_pools}.values()
    fams = {g.family for g in gpus}
    for g in gpus:
        if not has_flash_attention(g):
            notes.append(
                f"{g.name} has no FlashAttention kernel (flash-attn does not run on {g.family}): attention is "
                "priced as the unfused scale-mask-softmax path Megatron-LM and DeepSpeed run there."
            )
    if fams - set(FRAMEWORK_FACTOR):
        notes.append(
            f"GPU families {sorted(fams - set(FRAMEWORK_FACTOR))} use the default framework efficiency "
            f"({FRAMEWORK_FACTOR_DEFAULT}; no factor fitted to their own runs)."
        )
    return notes
