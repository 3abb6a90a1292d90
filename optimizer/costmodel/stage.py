"""One pipeline stage's per-micro-batch time and per-GPU memory, composed from the terms in costmodel/terms/
[formulas A-C]: its layers (layer_cost.py, cached by the cost context, cost_context.py), the output layer, the
pipeline sends, the data-parallel / ZeRO sync and the optimizer step, and the memory terms (stage_memory.py)."""

from __future__ import annotations

from dataclasses import replace

from optimizer.costmodel import network as net
from optimizer.costmodel.compute import gemm_efficiency, hbm_time, peak_flops
from optimizer.costmodel.cost_context import CostContext, PoolFacts, StageCost
from optimizer.costmodel.layer_cost import NO_FABRIC, LayerCost
from optimizer.costmodel.placed_fabric import PlacedFabric, StageFabric
from optimizer.costmodel.stage_memory import (
    embedding_activation_bytes,
    layer_activation_bytes,
    stage_param_counts,
    state_memory,
    transient_bytes,
)
from optimizer.costmodel.terms.data_parallel import (
    Zero3Schedule,
    bf16_optimizer_accumulate_time,
    dp_exposed,
    optimizer_step_time,
    shard_ranks,
    sharded_groups,
    zero3_exposed,
)
from optimizer.costmodel.terms.offload import offload_exposed, offloaded_bytes
from optimizer.costmodel.terms.pipeline import pp_hop, pp_message_bytes
from optimizer.spec.cluster_spec import NodePool
from optimizer.spec.gpu_catalog import GPUSpec

# Callers import the context and the cost records from here (the modules above are their homes).
__all__ = ["STAGE_PARTS", "CostContext", "LayerCost", "PoolFacts", "StageCost", "layout_stages", "stage_cost"]

# The output layer's fp32 softmax / cross-entropy pass, HBM bytes per logit (~12: fp32 read, write, re-read)
# [MLM cross_entropy.py vocab-parallel fused kernel; formulas A].
CROSS_ENTROPY_BYTES_PER_LOGIT = 12


# The step-time parts a stage reports per micro-batch (StepBreakdown's fields, seconds).
STAGE_PARTS = ("forward", "backward", "recompute", "tp_comm", "cp_comm", "ep_comm", "pp_comm", "offload", "launch")


def stage_cost(
    ctx: CostContext,
    first: bool,
    last: bool,
    moe_layers: int,
    layers: int,
    pool: NodePool,
    next_pool: NodePool | None,
    fabric: StageFabric | None = None,
) -> StageCost:
    """Costs of a stage of `layers` layers (`moe_layers` of them MoE) on `pool`, sending to `next_pool`; `fabric`:
    what its placement gives its groups where that is worse than the tiers assume (placed_fabric.py)."""
    key = (first, last, moe_layers, layers, pool.name, next_pool.name if next_pool is not None else None)
    if fabric is not None:
        placed_key = (*key, fabric)
        hit = ctx.placed_stage_cache.get(placed_key)
        if hit is None:
            hit = ctx.placed_stage_cache[placed_key] = _stage_cost(
                ctx, first, last, moe_layers, layers, pool, next_pool, fabric
            )
        return hit
    hit = ctx.stage_cache.get(key)
    if hit is None:
        hit = _stage_cost(ctx, first, last, moe_layers, layers, pool, next_pool, None)
        ctx.stage_cache[key] = hit
    return hit


def layout_stages(
    ctx: CostContext, pools: tuple[NodePool, ...], layers: tuple[int, ...], fabric: PlacedFabric | None = None
) -> list[StageCost]:
    """The StageCost of every stage of a layout (pool and layer count per stage; `fabric`: per stage, what its
    placement gives, None where nothing differs from the tiers)."""
    p = len(layers)
    out = []
    start = 0
    for i, (pool, n) in enumerate(zip(pools, layers, strict=True)):
        moe = ctx.moe_count(start, n)
        nxt = pools[i + 1] if i + 1 < p else None
        placed = fabric[i] if fabric is not None else None
        out.append(stage_cost(ctx, i == 0, i == p - 1, moe, n, pool, nxt, placed))
        start += n
    return out


def _layers_time(
    ctx: CostContext,
    pool: NodePool,
    gpu: GPUSpec,
    dense_layers: int,
    moe_layers: int,
    parts: dict[str, float],
    fabric: StageFabric | None,
) -> tuple[float, float, float]:
    """(forward, backward, weight-gradient) time of a stage's layers per micro-batch, adding each part to `parts`.
    Of the exposed communication, EP counts half forward, CP a third (its forward ring of the three passes)."""
    fwd = bwd = wgrad = 0.0
    # A layer's own groups (TP, CP, EP); a placement that moves only the DP groups or the sends leaves it as is.
    touches = fabric is not None and any(x is not None for x in (fabric.tp, fabric.cp, fabric.cp_ring, fabric.ep))
    layer_fabric = fabric if touches else None
    for count, is_moe in ((dense_layers, False), (moe_layers, True)):
        if not count:
            continue
        lc = ctx.layer(pool, gpu, is_moe, layer_fabric)
        parts["forward"] += count * lc.fwd
        parts["backward"] += count * lc.bwd
        parts["recompute"] += count * lc.recompute
        parts["tp_comm"] += count * lc.tp
        parts["cp_comm"] += count * lc.cp
        parts["ep_comm"] += count * lc.ep
        parts["launch"] += count * lc.launch
        fwd += count * (lc.fwd + lc.tp_fwd + lc.ep / 2 + lc.cp / 3 + lc.launch_fwd)
        launch_bwd = lc.launch - lc.launch_fwd
        bwd += count * (lc.bwd + lc.recompute + lc.tp - lc.tp_fwd + lc.ep / 2 + lc.cp * 2 / 3 + launch_bwd)
        wgrad += count * lc.wgrad
    return fwd, bwd, wgrad


def _output_layer_time(ctx: CostContext, gpu: GPUSpec, mtp: int) -> tuple[float, float]:
    """(logits GEMM, softmax / cross-entropy) forward time of the last stage per micro-batch: the GEMM 2*b*s*h*V
    (its backward 2x) and the fp32 softmax/cross-entropy pass (~12 B/logit); each MTP module adds its own logits
    and loss and its 2h -> h projection (a dense GEMM)."""
    model, tokens, tp = ctx.model, ctx.tokens, ctx.c.tp
    fp8_logits = ctx.fp8 and ctx.rt.fp8_output_layer  # Megatron keeps the output layer in BF16 (frameworks.py)
    eff = gemm_efficiency(gpu, tokens * 2 * model.hidden_size * model.vocab_size / tp, fp8_logits)
    t_logit = tokens * 2 * model.hidden_size * model.vocab_size / tp / (peak_flops(gpu, fp8_logits) * eff)
    t_ce = hbm_time(gpu, tokens * model.vocab_size / tp * CROSS_ENTROPY_BYTES_PER_LOGIT)
    if mtp:
        proj = tokens * 2 * 2 * model.hidden_size**2 / tp
        t_proj = proj / (peak_flops(gpu, ctx.fp8) * gemm_efficiency(gpu, proj, ctx.fp8))
        t_logit, t_ce = (1 + mtp) * t_logit + mtp * t_proj, (1 + mtp) * t_ce
    return t_logit, t_ce


def _pp_send_time(ctx: CostContext, pool: NodePool, next_pool: NodePool | None, placed: net.Tier | None) -> float:
    """Exposed pipeline sends per micro-batch and pass: activations b*s*h forward, their gradient backward, per
    boundary and per model chunk [N21 §3.2, §4.1, §2.2.2]. `placed`: the tier the placement gives the sends to
    neighbours on the same pool, where it is worse than the tiers assume."""
    c = ctx.c
    msg = pp_message_bytes(ctx.tokens, ctx.model.hidden_size, c.tp, ctx.rt.pp_scatter_gather)
    cross = next_pool is not None and next_pool.name != pool.name
    next_tiers = ctx.tiers(next_pool) if cross and next_pool is not None else None
    if placed is not None and next_tiers is None:
        return c.vp * net.p2p(placed.bw, placed.network, msg)
    return c.vp * pp_hop(ctx.tiers(pool), next_tiers, c.gpus_per_stage, msg)


def _dp_sync_time(
    ctx: CostContext,
    pool: NodePool,
    dense_total: float,
    expert_p: float,
    layers: int,
    fwd: float,
    bwd: float,
    placed: StageFabric,
) -> tuple[float, float]:
    """(exposed DP sync, exposed ZeRO-3 / FSDP communication) of one step on one stage, seconds; the groups span
    what `placed` gives where its placement says so."""
    c = ctx.c
    dpc, edp = c.dp * c.cp, c.expert_dp
    if not (dpc > 1 or edp > 1):
        return 0.0, 0.0
    tiers = ctx.tiers(pool)
    groups = sharded_groups(
        c,
        tiers,
        dense_total,
        expert_p,
        ctx.grad_bytes,
        ctx.w.fp8_param_gather,
        ctx.rt.replica_reduce_every_microbatch,
    )
    if c.shard_group is None and (placed.dp is not None or placed.edp is not None):
        # The placement's own spans where it is worse than the tiers assume (whole-group sharding only: a shard
        # group's levels are its own)
        groups = replace(
            groups,
            dense_levels=placed.dp if placed.dp is not None else groups.dense_levels,
            expert_levels=placed.edp if placed.edp is not None else groups.expert_levels,
        )
    after_pipeline = c.pp > 1 and ctx.rt.grad_reduce_after_pipeline  # reduced after the last micro-batch
    if c.zero_stage == 3 and not ctx.bf16_optimizer and not after_pipeline:
        # ZeRO-3 / FSDP: gather params forward and backward, reduce-scatter grads, each micro-batch [Z20 §7]
        rt = ctx.rt
        schedule = Zero3Schedule(
            collectives_per_layer=rt.zero3_collectives_per_layer,
            node_aggregation=rt.zero3_node_aggregation,
            overlap=rt.zero3_overlap,
        )
        if not groups.replicated:
            return 0.0, ctx.m * zero3_exposed(groups, schedule, layers, fwd, bwd)
        # Replicas of a shard group all-reduce their gradient shards after every micro-batch (FSDP2) or after the
        # last (MiCS, Megatron-FSDP) [formulas C9]
        last = zero3_exposed(groups, schedule, layers, fwd, bwd, replica_reduce_now=True)
        each = last if groups.replica_every_microbatch else zero3_exposed(groups, schedule, layers, fwd, bwd)
        return 0.0, (ctx.m - 1) * each + last
    chunks = max(1.0, layers / c.vp if c.pp > 1 else layers)
    dp_t = dp_exposed(
        groups, c.zero_stage, c.overlap_grad_reduce, ctx.bf16_optimizer, after_pipeline, chunks, fwd, bwd, ctx.m
    )
    return dp_t, 0.0


def _stage_cost(
    ctx: CostContext,
    first: bool,
    last: bool,
    moe_layers: int,
    layers: int,
    pool: NodePool,
    next_pool: NodePool | None,
    fabric: StageFabric | None,
) -> StageCost:
    model, c = ctx.model, ctx.c
    placed = fabric or NO_FABRIC
    gpu = ctx.gpu(pool)
    # Multi-token prediction runs on the last rank after the decoder layers: each module one more transformer
    # layer (its compute, collectives, parameters and activations), a 2h -> h projection and one more logits and
    # loss pass [MLM multi_token_prediction.py; the layout's 'm' sits in the last stage, pipeline_layout.py].
    mtp = model.mtp_layers if last else 0
    layers += mtp
    moe_layers += mtp if model.mtp_layer_is_moe else 0
    dense_layers = layers - moe_layers
    parts = dict.fromkeys(STAGE_PARTS, 0.0)
    fwd, bwd, wgrad = _layers_time(ctx, pool, gpu, dense_layers, moe_layers, parts, fabric)
    if last:
        t_logit, t_ce = _output_layer_time(ctx, gpu, mtp)
        parts["forward"] += t_logit + t_ce
        parts["backward"] += 2 * t_logit + t_ce
        fwd += t_logit + t_ce
        bwd += 2 * t_logit + t_ce
        wgrad += t_logit
    if c.pp > 1:
        pp_t = _pp_send_time(ctx, pool, next_pool, placed.pp)
        parts["pp_comm"] += 2 * pp_t
        fwd += pp_t
        bwd += pp_t

    # ---- parameters, DP, optimizer -------------------------------------------------------------------------
    dense_p, expert_p, emb_p = stage_param_counts(ctx, dense_layers, moe_layers, first, last, mtp)
    if ctx.bf16_optimizer:
        t_acc = bf16_optimizer_accumulate_time(gpu, dense_p + expert_p + emb_p)
        parts["backward"] += t_acc
        bwd += t_acc
    dpc, edp = shard_ranks(c)
    dense_total = dense_p + emb_p
    dp_t, zero_t = _dp_sync_time(ctx, pool, dense_total, expert_p, layers, fwd, bwd, placed)
    opt_t = optimizer_step_time(gpu, dense_total, expert_p, c.zero_stage, dpc, edp)

    # ---- memory (stage_memory.py) ------------------------------------------------------------------------------
    weights, grads, optim, emb = state_memory(ctx, dense_p, expert_p, emb_p)
    acts = layer_activation_bytes(ctx, dense_layers, moe_layers)
    if c.offload_layers and layers:
        moved = offloaded_bytes(acts, c.offload_layers, layers)
        acts -= moved
        off_f, off_b = offload_exposed(gpu, moved, fwd, bwd)
        parts["offload"] += off_f + off_b
        fwd += off_f
        bwd += off_b
    if first:
        acts += embedding_activation_bytes(ctx)
    return StageCost(
        fwd=fwd,
        bwd=bwd,
        wgrad=wgrad,
        parts=parts,
        dp=dp_t,
        zero=zero_t,
        opt=opt_t,
        weights=weights,
        grads=grads,
        optim=optim,
        emb=emb,
        transient=transient_bytes(ctx, last, moe_layers, layers, dense_p, expert_p),
        reserve=ctx.reserve(pool),
        capacity=gpu.memory_bytes,
        act_per_mb=acts,
    )
