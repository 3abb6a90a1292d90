"""Why this plan: binding constraints, where the time goes, what makes the runner-up slower. (When nothing fits,
`optimizer.search.diagnosis` says which resource runs out.)"""

from __future__ import annotations

from typing import TYPE_CHECKING

from optimizer.costmodel.result import MFU_TAG, Goodput
from optimizer.search.decision import Decision, memory_figures, reason
from optimizer.search.result import (
    Alternative,
    BindingConstraint,
    Explanation,
    PlannedConfig,
)

if TYPE_CHECKING:
    from optimizer.search.candidates import TrainingSpace

BINDING_SHARE = 0.85


def describe(c: object, serving: bool = False) -> str:
    """Short text of a configuration's main knobs (serving: the knobs an engine has, no training vocabulary)."""
    g = c.__getattribute__
    parts = [f"tp={g('tp')}", f"pp={g('pp')}", f"dp={g('dp')}"]
    if serving:
        parts += [f"ep={g('ep')}"] if g("ep") > 1 else []
        if getattr(c, "ep_comm_overlap", False):
            parts.append("two-batch-overlap")
        return " ".join(parts)
    for k in ("cp", "ep", "vp"):
        if g(k) > 1:
            parts.append(f"{k}={g(k)}")
            if k == "cp" and getattr(c, "cp_comm", "p2p") != "p2p":
                parts[-1] += f"({g('cp_comm')})"
    etp = getattr(c, "etp", None)
    if etp is not None and etp != g("tp"):
        parts.append(f"etp={etp}")
    parts += [f"mbs={g('mbs')}", f"{g('schedule')}", f"zero={g('zero_stage')}"]
    shard = getattr(c, "shard_group", None)
    if shard is not None:  # a sharding group smaller than dp: HSDP / MiCS / instances, or ZeRO++ hpZ
        parts[-1] += f"(hpz={shard})" if getattr(c, "shard_scope", "states") == "weights" else f"(shard={shard})"
    parts.append(f"recompute={g('recompute')}")
    mods = getattr(c, "recompute_modules", None)
    if mods and g("recompute") == "selective":
        parts[-1] += f"({'+'.join(mods)})"
    if g("sequence_parallel"):
        parts.append("sp")
    if g("tp_comm_overlap"):
        parts.append("tp-overlap")
    if getattr(c, "ep_comm_overlap", False):
        parts.append("ep-overlap")
    if getattr(c, "ep_dispatch", "alltoall") != "alltoall":
        parts.append(f"dispatch={g('ep_dispatch')}")
    if getattr(c, "offload_layers", 0):
        parts.append(f"offload={g('offload_layers')}")
    return " ".join(parts)


def decision_text(d: Decision) -> str:
    """What the interval rule decided, when it, not the point estimate, chose the plan (or flagged it)."""
    parts = []
    pick, fastest = d.pick, d.fastest
    if pick is not fastest:
        faster = 100 * (1 - fastest.objective / pick.objective)
        lo, hi = d.fastest_interval_pct
        parts.append(
            f"Picked {describe(pick.config)} over {describe(fastest.config)} ({faster:.1f}% faster predicted, "
            f"indistinguishable: difference interval {lo:+.1f}..{hi:+.1f}%) because {reason(pick, fastest)}."
        )
    if d.roomier is not None:
        r = d.roomier
        slower, more = 100 * (r.objective / pick.objective - 1), r.headroom_gb - pick.headroom_gb
        parts.append(
            f"Kept it over {describe(r.config)} ({slower:.1f}% slower predicted, {more:.1f} GB more headroom): "
            "headroom decides only where the faster plan's memory interval reaches the GPU's capacity, and this "
            f"one's {memory_figures(pick.estimate).text()}."
        )
    skipped = [
        (describe(c.config), 100 * (1 - c.objective / pick.objective), memory_figures(c.estimate).text())
        for c in d.skipped_oom
    ]
    if len(skipped) == 1:
        what, faster, figures = skipped[0]
        parts.append(
            f"Passed over {what} ({faster:.1f}% faster predicted): its 80% upper memory bound exceeds the GPU's "
            f"memory ({figures})."
        )
    elif skipped:  # one sentence, not one per plan [issue 48 §10]
        parts.append(
            f"Passed over {len(skipped)} faster plans whose 80% upper memory bound exceeds the GPU's memory: "
            + "; ".join(f"{what} ({faster:.1f}% faster predicted, {figures})" for what, faster, figures in skipped)
            + "."
        )
    if d.all_oom:
        parts.append(
            "Out-of-memory risk: no plan found fits with margin; this one's 80% upper memory bound exceeds the GPU's "
            f"memory ({memory_figures(pick.estimate).text()})."
        )
    return " ".join(parts)


def _band(x: tuple[float, float] | None, fmt: str) -> str:
    return f" (80% {fmt.format(x[0])}-{fmt.format(x[1])})" if x is not None else ""


def interval_text(g: Goodput) -> str:
    """The checkpoint interval as run, with the optimum beside a fixed one and the floor that bounds it."""
    text = f"every {g.interval_s:,.0f} s ({g.interval_steps} steps"
    if g.interval_fixed:
        text += f", fixed; optimum {g.optimal_interval_s:,.0f} s"
    elif g.interval_floor_s > 0 and g.interval_s <= g.interval_floor_s * 1.0001:
        text += ", held at the floor: one step, the storage's share"
    return text + ")"


def lost_parts_text(g: Goodput) -> str:
    """Hours lost per day and their parts (they add up to the total)."""
    parts = [
        ("checkpoints", g.checkpoint_h_per_day),
        ("rework", g.rework_h_per_day),
        ("detection", g.detection_h_per_day),
        ("restarts", g.restart_h_per_day),
        ("warm-up", g.warmup_h_per_day),
        ("planned", g.planned_h_per_day),
        ("slowdown", g.slowdown_h_per_day),
    ]
    listed = ", ".join(f"{name} {h:.2f}" for name, h in parts)
    return f"{g.lost_h_per_day:.2f} h{_band(g.lost_h_per_day_interval, '{:.2f}')} ({listed})"


def goodput_text(g: Goodput) -> str:
    """One sentence of a training plan's goodput (costmodel/goodput.py)."""
    save = f"async, blocks {g.blocking_s:.2g} s" if g.async_save else "synchronous"
    return (
        f"Goodput {g.fraction:.1%}{_band(g.fraction_interval, '{:.1%}')}: checkpoint {g.checkpoint_gb:,.0f} GB "
        f"({g.checkpoint_gb_per_rank:.3g} GB per rank, {g.checkpoint_tier}, write {g.write_s:.3g} s, {save}) "
        f"{interval_text(g)}; {g.failures_per_day:.3g} failures/day on {g.nodes} nodes ({g.spare_nodes} spare), "
        f"{g.detection_s:,.0f} s to detect, {g.restart_s:,.0f} s per restart; lost per day {lost_parts_text(g)}; "
        f"{g.useful_tokens_per_s:,.0f} useful tokens/s{_band(g.useful_tokens_per_s_interval, '{:,.0f}')}"
    )


def goodput_lines(g: Goodput) -> str:
    """The CLI's goodput line (estimate and plan)."""
    save = f"async, blocks {g.blocking_s:.2g} s" if g.async_save else "synchronous"
    return (
        f"goodput {g.fraction:.1%}{_band(g.fraction_interval, '{:.1%}')} | {g.useful_tokens_per_s:,.0f} useful "
        f"tokens/s{_band(g.useful_tokens_per_s_interval, '{:,.0f}')} | checkpoint {g.checkpoint_gb:,.0f} GB "
        f"({g.checkpoint_gb_per_rank:.3g} GB per rank, {g.checkpoint_tier}), write {g.write_s:.3g} s ({save}), load "
        f"{g.load_s:.3g} s, {interval_text(g)} | {g.failures_per_day:.3g} failures/day on {g.nodes} nodes, "
        f"{g.spare_nodes} spare, {g.detection_s:,.0f} s to detect, {g.restart_s:,.0f} s per restart | lost per day: "
        f"{lost_parts_text(g)}"
    )


def goodput_change(fast: PlannedConfig, pick: PlannedConfig, budget: int | None) -> str:
    """What the failure model changed against the step-time optimum `fast` (objective goodput)."""
    gf, gp = fast.estimate.goodput, pick.estimate.goodput
    if gf is None or gp is None:
        return ""
    same_cost = abs(gp.blocking_s - gf.blocking_s) <= 0.05 * max(gf.blocking_s, gp.blocking_s)
    if gp.nodes == gf.nodes and gp.spare_nodes == gf.spare_nodes and same_cost:
        return (
            f"The failure model changes nothing against the step-time optimum (the same {gp.nodes} nodes, "
            f"{gp.spare_nodes} spare, a checkpoint as costly): {gp.lost_h_per_day:.2f} h/day lost, goodput "
            f"{gp.fraction:.1%}."
        )
    of = f" of {budget}" if budget else ""
    gain = 100 * (gp.useful_tokens_per_s / gf.useful_tokens_per_s - 1) if gf.useful_tokens_per_s > 0 else 0.0
    parts = [
        f"Goodput chose {pick.config.gpus}{of} GPUs ({describe(pick.config)}) over the step-time optimum's "
        f"{fast.config.gpus} ({describe(fast.config)}): step {pick.estimate.step_time_s:.3g} s against "
        f"{fast.estimate.step_time_s:.3g} s"
    ]
    if gp.spare_nodes != gf.spare_nodes:
        parts.append(f"{gp.spare_nodes} spare nodes against {gf.spare_nodes}")
    if abs(gp.failures_per_day - gf.failures_per_day) > 0.01 * gf.failures_per_day:
        parts.append(f"{gp.failures_per_day:.3g} failures/day against {gf.failures_per_day:.3g}")
    if abs(gp.restart_s - gf.restart_s) > 1:
        parts.append(f"a restart takes {gp.restart_s:,.0f} s against {gf.restart_s:,.0f} s")
    if abs(gp.blocking_s - gf.blocking_s) > 0.01 * max(gf.blocking_s, 1e-9):
        parts.append(f"a checkpoint blocks {gp.blocking_s:.3g} s against {gf.blocking_s:.3g} s")
    parts.append(
        f"hours lost per day {gf.lost_h_per_day:.2f} -> {gp.lost_h_per_day:.2f}, useful tokens/s "
        f"{gf.useful_tokens_per_s:,.0f} -> {gp.useful_tokens_per_s:,.0f} ({gain:+.1f}%)"
    )
    return "; ".join(parts) + "."


def explain(
    ts: TrainingSpace | None,
    planned: PlannedConfig,
    alts: list[Alternative],
    budget: int | None = None,
    decision: Decision | None = None,
) -> Explanation:
    est, cfg = planned.estimate, planned.config
    binding = []
    for s in sorted(est.stages, key=lambda s: -s.memory_gb.total / s.memory_gb.capacity)[:3]:
        share = s.memory_gb.total / s.memory_gb.capacity
        binding.append(
            BindingConstraint(
                kind="memory",
                share=share,
                detail=f"stage {s.index} ({s.layers} layers on {s.gpu}, pool {s.pool}) uses {s.memory_gb.total:.1f} of "
                f"{s.memory_gb.capacity:.1f} GB ({share:.0%})" + (" - binding" if share >= BINDING_SHARE else ""),
            )
        )
    budget = budget if budget is not None else (ts.budget if ts is not None else None)
    if budget:
        binding.append(
            BindingConstraint(
                kind="gpus", share=cfg.gpus / budget, detail=f"uses {cfg.gpus} of {budget} available GPUs"
            )
        )
    breakdown = {k: v for k, v in est.breakdown.model_dump().items() if v > 0}
    top = sorted(breakdown.items(), key=lambda kv: -kv[1])[:3]
    serving = est.mode == "inference"
    if not serving:
        head = (
            f"{describe(cfg)}: step {est.step_time_s:.3f} s, {est.tokens_per_s:,.0f} tokens/s, "
            f"MFU {est.mfu:.1%} ({MFU_TAG})"
        )
    else:
        head = (
            f"{describe(cfg, serving)}: TPOT {1000 * (est.tpot_s or 0):.2f} ms, TTFT {1000 * (est.ttft_s or 0):.1f} ms"
        )
    summary = head + "; time goes to " + ", ".join(f"{k} {v / est.step_time_s:.0%}" for k, v in top)
    if est.goodput is not None:
        summary += ". " + goodput_text(est.goodput)
    note = decision_text(decision) if decision is not None else ""
    summary += f". {note}" if note else ""
    if est.beyond_measured:  # the pick claims an MFU no published run of its GPU and precision has shown
        summary += f". Caveat: {est.beyond_measured}"
    versus = None
    if alts:
        r = alts[0]
        rb = r.estimate.breakdown.model_dump()
        diffs = sorted(((k, rb.get(k, 0.0) - breakdown.get(k, 0.0)) for k in rb), key=lambda kv: -kv[1])
        worse = [f"{k} +{d:.3g} s" for k, d in diffs if d > 0][:3]
        how = f"{r.delta_pct:.1f}% slower" if r.delta_pct >= 0 else f"{-r.delta_pct:.1f}% faster predicted"
        if r.delta_interval_pct is not None and r.indistinguishable:
            lo, hi = r.delta_interval_pct
            how += f", indistinguishable: difference interval {lo:+.1f}..{hi:+.1f}%"
        versus = (
            f"runner-up {describe(r.config, serving)} is {how} (differs in "
            f"{', '.join(r.differs_in) or 'stage layout'}): " + (", ".join(worse) or "same terms, larger total")
        )
    return Explanation(summary=summary, binding=binding, time_breakdown=breakdown, versus_runner_up=versus)
