"""SVG figures drawn on the server: device mesh, pipeline timeline, per-stage memory, step-time breakdown.
Colours come from a palette ordered by lightness (viridis stops), so stages stay distinguishable in greyscale;
every mark also carries its number or a label."""

from __future__ import annotations

from bisect import bisect_right
from html import escape

from optimizer.costmodel.result import Estimate
from optimizer.exports.timeline import Timeline
from optimizer.placement.result import Placement
from optimizer.spec.cluster_spec import ClusterSpec, NodePool
from optimizer.spec.parallel_config import ParallelConfig
from service.calibration import MeasuredPoint

# viridis at 10 stops: luminance rises monotonically, so greyscale keeps the order
PALETTE = ["#440154", "#482878", "#3e4989", "#31688e", "#26828e", "#1f9e89", "#35b779", "#6ece58", "#b5de2b", "#fde725"]
MEMORY_PARTS = [
    ("weights", "#1b1b1b"),
    ("gradients", "#4d4d4d"),
    ("optimizer", "#7a7a7a"),
    ("embedding_lm_head", "#a6a6a6"),
    ("activations", "#3e4989"),
    ("kv_cache", "#26828e"),
    ("transient", "#6ece58"),
    ("reserve", "#fde725"),
]


def colour(i: int, n: int) -> str:
    return PALETTE[0 if n <= 1 else round(i * (len(PALETTE) - 1) / (n - 1))]


def text_colour(fill: str) -> str:
    return "#fff" if fill in PALETTE[:5] or fill in ("#1b1b1b", "#4d4d4d", "#7a7a7a") else "#000"


def _svg(width: float, height: float, body: list[str], label: str, cls: str) -> str:
    return (
        f'<svg class="{cls}" role="img" aria-label="{escape(label)}" viewBox="0 0 {width:.0f} {height:.0f}" '
        f'width="{width:.0f}" height="{height:.0f}" preserveAspectRatio="xMinYMin meet" '
        f'xmlns="http://www.w3.org/2000/svg" '
        f'font-family="system-ui, sans-serif" font-size="11">{"".join(body)}</svg>'
    )


def interval_band(point: float, interval: tuple[float, float] | None, unit: str, label: str, width: int = 300) -> str:
    """An 80% interval drawn as a band on its own axis, the point estimate a tick inside it (no interval: the
    point alone, labelled as such)."""
    if interval is None:
        return f'<span class="band-missing">{point:.3g} {unit} (no interval)</span>'
    low, high = interval
    lo_axis, hi_axis = min(low, point) * 0.9, max(high, point) * 1.1
    left, right, height = 8, width - 8, 34

    def x(v: float) -> float:
        return left + (v - lo_axis) / (hi_axis - lo_axis) * (right - left)

    body = [
        f'<line x1="{left}" x2="{right}" y1="14" y2="14" stroke="#999"/>',
        f'<rect class="band" data-low="{low:.6g}" data-high="{high:.6g}" x="{x(low):.2f}" y="6" '
        f'width="{max(1.0, x(high) - x(low)):.2f}" height="16" fill="#3e4989" fill-opacity="0.35">'
        f"<title>80% interval {low:.3g}-{high:.3g} {unit}</title></rect>",
        f'<line class="point" data-value="{point:.6g}" x1="{x(point):.2f}" x2="{x(point):.2f}" y1="3" y2="25" '
        f'stroke="#000" stroke-width="2"/>',
        f'<text x="{x(low):.2f}" y="{height - 1}" text-anchor="middle">{low:.3g}</text>',
        f'<text x="{x(high):.2f}" y="{height - 1}" text-anchor="middle">{high:.3g} {escape(unit)}</text>',
    ]
    return _svg(width, height, body, f"{label}: {point:.3g} {unit}, 80% interval {low:.3g} to {high:.3g}", "band")


def _healthy_before(pool: NodePool, index: int) -> int:
    """Healthy nodes of `pool` before node `index`: a counted pool's from its overrides alone (generated names have
    one width, so they sort as their indices), a listed pool's by scanning its parsed nodes up to `index`."""
    if isinstance(pool.nodes, int):
        cut = pool.node_name(index) if index < pool.nodes else None
        down = sum(1 for n, st in pool.node_states.items() if st != "healthy" and (cut is None or n < cut))
        return index - down
    states = pool.node_states
    return sum(1 for n in pool.nodes[:index] if states.get(n.name, n.state) == "healthy")


def device_mesh(
    cluster: ClusterSpec,
    cfg: ParallelConfig,
    est: Estimate,
    max_nodes: int = 48,
    placement: Placement | None = None,
    first: int = 0,
) -> str:
    """Nodes (rows) x GPUs (columns), coloured by pipeline stage; TP groups outlined: `max_nodes` rows from row
    `first` (the plan page pages them with ?nodes_from=), built without walking the other nodes. With a placement,
    its hosts run the ranks it gives them (the placed hosts first, in node-rank order); without, ranks fill each
    stage's pool in Megatron's order (tp fastest, then cp, then dp)."""
    per_stage = cfg.tp * cfg.cp * cfg.dp
    pools = {p.name: p for p in cluster.pools}
    if placement is not None:
        return _placed_mesh(cluster, placement, len(est.stages), cfg.tp, max_nodes, first)
    on_pool: dict[str, list[int]] = {name: [] for name in pools}  # pool -> its stages, in rank order
    for st in est.stages:
        on_pool[st.pool].append(st.index)

    def owner_of(pool_name: str, gpu: int) -> tuple[int, int] | None:
        """(stage, tp group) of the pool's healthy GPU number `gpu`: stages fill a pool in blocks of per_stage."""
        block = gpu // per_stage
        stages = on_pool[pool_name]
        return (stages[block], (gpu % per_stage) // cfg.tp) if block < len(stages) else None

    rows: list[tuple[str, str, int]] = []  # (pool, node name, node's first gpu index among healthy)
    healthy: dict[str, int] = {}
    for pool, i, node in cluster.indexed_nodes_page(first, max_nodes):
        if pool.name not in healthy:
            healthy[pool.name] = _healthy_before(pool, i)
        if node.state == "healthy":
            rows.append((pool.name, node.name, healthy[pool.name] * pool.gpus_per_node))
            healthy[pool.name] += 1
        else:
            rows.append((pool.name, f"{node.name} ({node.state})", -1))
    total = cluster.node_count
    shown = rows
    owner = {
        (pn, k + g): o
        for pn, _l, k in rows
        if k >= 0
        for g in range(pools[pn].gpus_per_node)
        if (o := owner_of(pn, k + g)) is not None
    }
    cell, gap, left, top = 16, 2, 110, 18
    gpn = max(p.gpus_per_node for p in cluster.pools)
    width = left + gpn * (cell + gap) + 10
    more = total - first - len(shown)
    height = top + len(shown) * (cell + gap) + (18 if more > 0 or first > 0 else 4)
    body = [f'<text x="0" y="12" font-weight="bold">node</text><text x="{left}" y="12">GPUs (number = stage)</text>']
    n_stages = len(est.stages)
    for i, (pool_name, label, first) in enumerate(shown):
        y = top + i * (cell + gap)
        body.append(f'<text x="0" y="{y + 12}">{escape(label[:18])}</text>')
        for g in range(pools[pool_name].gpus_per_node):
            x = left + g * (cell + gap)
            own = owner.get((pool_name, first + g)) if first >= 0 else None
            if own is None:
                fill, txt, extra = "#ffffff", "", ' stroke="#999" stroke-dasharray="2,2"'
            else:
                fill, txt, extra = colour(own[0], n_stages), str(own[0]), ""
            data = f' data-stage="{own[0]}" data-tp-group="{own[1]}"' if own else ' data-idle="1"'
            body.append(
                f'<rect class="gpu" x="{x}" y="{y}" width="{cell}" height="{cell}" fill="{fill}"{extra}{data}/>'
            )
            if txt:
                body.append(
                    f'<text x="{x + cell / 2}" y="{y + 12}" text-anchor="middle" font-size="9" '
                    f'fill="{text_colour(fill)}">{txt}</text>'
                )
        # TP groups: consecutive runs of one (stage, tp group) on a node
        g = 0
        while g < pools[pool_name].gpus_per_node and first >= 0:
            own = owner.get((pool_name, first + g))
            if own is None:
                g += 1
                continue
            run = 1
            while g + run < pools[pool_name].gpus_per_node and owner.get((pool_name, first + g + run)) == own:
                run += 1
            x = left + g * (cell + gap) - 1
            body.append(
                f'<rect class="tp-group" x="{x}" y="{y - 1}" width="{run * (cell + gap) - gap + 2}" '
                f'height="{cell + 2}" fill="none" stroke="#000" stroke-width="1.5"/>'
            )
            g += run
    _not_drawn(body, height, first, more)
    return _svg(width, height, body, f"device mesh: {total} nodes, {n_stages} stages, TP groups of {cfg.tp}", "mesh")


def _not_drawn(body: list[str], height: int, first: int, more: int) -> None:
    """The line under a mesh page: how many nodes it leaves out before and after."""
    parts = ([f"{first} nodes before"] if first > 0 else []) + ([f"{more} more nodes"] if more > 0 else [])
    if parts:
        body.append(f'<text x="0" y="{height - 4}">… {" and ".join(parts)} not drawn</text>')


def _unplaced_at(pool: NodePool, placed: list[str], j: int) -> int:
    """Index in `pool` of its `j`-th node (0-based) not among `placed` (sorted names of the pool's placed hosts).
    A counted pool's generated names sort as their indices: the index is the least fixed point of
    i = j + (placed names <= name(i)), reached from i = j in at most len(placed) steps; a listed pool's parsed
    names are scanned."""
    if isinstance(pool.nodes, list):
        taken = set(placed)
        for i, node in enumerate(pool.nodes):
            if node.name not in taken:
                if j == 0:
                    return i
                j -= 1
        return len(pool.nodes)
    i = j
    while (nxt := j + bisect_right(placed, pool.node_name(i))) != i:
        i = nxt
    return i


def _placed_mesh(cluster: ClusterSpec, p: Placement, n_stages: int, tp: int, max_nodes: int, first: int) -> str:
    """device_mesh of a placement: its hosts in node-rank order, then the cluster's other nodes (idle, drained or
    failed); a TP group split across NVLink domains is outlined in red. Rows `first` to `first + max_nodes`: the
    cluster's other nodes are walked only as far as the page reaches (skipping the placed ones)."""
    cell, gap, left, top = 16, 2, 150, 18
    split = {g for g, d in enumerate(p.tp_domains) if " + " in d}
    placed = {(h.pool, h.name) for h in p.hosts}
    rows: list[tuple[str, str, int, int]] = []  # (pool, label, first rank, ranks)
    for h in p.hosts[first : first + max_nodes]:
        rows.append((h.pool, f"{h.name} · {h.nvlink_domain}", h.first_rank, h.ranks))
    skip = max(0, first - len(p.hosts))  # other nodes before the page
    for pool in cluster.pools:
        if len(rows) >= max_nodes:
            break
        names = sorted(n for q, n in placed if q == pool.name)
        if skip >= pool.node_count - len(names):
            skip -= pool.node_count - len(names)
            continue
        i = _unplaced_at(pool, names, skip)
        skip = 0
        taken = set(names)
        while len(rows) < max_nodes and i < pool.node_count:
            node = pool.node_at(i)
            i += 1
            if node.name not in taken:
                state = "" if node.state == "healthy" else f" ({node.state})"
                rows.append((pool.name, f"{node.name}{state}", -1, 0))
    total = len(p.hosts) + cluster.node_count - len(placed)
    more = total - first - len(rows)
    shown = rows
    gpn = max(q.gpus_per_node for q in cluster.pools)
    width = left + gpn * (cell + gap) + 10
    height = top + len(shown) * (cell + gap) + (18 if more > 0 or first > 0 else 4)
    body = [f'<text x="0" y="12" font-weight="bold">host · NVLink domain</text><text x="{left}" y="12">GPUs</text>']
    gpus = {q.name: q.gpus_per_node for q in cluster.pools}
    for i, (pool_name, label, first, ranks) in enumerate(shown):
        y = top + i * (cell + gap)
        body.append(f'<text x="0" y="{y + 12}">{escape(label[:26])}</text>')
        for g in range(gpus[pool_name]):
            x = left + g * (cell + gap)
            if g >= ranks:
                body.append(
                    f'<rect class="gpu" x="{x}" y="{y}" width="{cell}" height="{cell}" fill="#ffffff" '
                    'stroke="#999" stroke-dasharray="2,2" data-idle="1"/>'
                )
                continue
            r = first + g
            stage = r // p.gpus_per_stage
            fill = colour(stage, n_stages)
            body.append(
                f'<rect class="gpu" x="{x}" y="{y}" width="{cell}" height="{cell}" fill="{fill}" '
                f'data-stage="{stage}" data-tp-group="{r // tp}" data-rank="{r}"/>'
                f'<text x="{x + cell / 2}" y="{y + 12}" text-anchor="middle" font-size="9" '
                f'fill="{text_colour(fill)}">{stage}</text>'
            )
        g = 0
        while g < ranks:  # TP groups: runs of one group on the host
            group = (first + g) // tp
            run = min(ranks - g, (group + 1) * tp - (first + g))
            x = left + g * (cell + gap) - 1
            stroke = "#c00" if group in split else "#000"
            body.append(
                f'<rect class="tp-group" x="{x}" y="{y - 1}" width="{run * (cell + gap) - gap + 2}" '
                f'height="{cell + 2}" fill="none" stroke="{stroke}" stroke-width="1.5"/>'
            )
            g += run
    _not_drawn(body, height, first, more)
    return _svg(
        width, height, body, f"device mesh: {len(p.hosts)} placed hosts, {n_stages} stages, TP groups of {tp}", "mesh"
    )


def pipeline_timeline(t: Timeline, width: int = 960, bubble: tuple[float, float] | None = None) -> str:
    """One row per stage; forward blocks light, backward dark, micro-batch numbers inside; gaps are the bubble.
    `bubble`: (the step breakdown's bubble, the step time), seconds: the one bubble figure the page states, so the
    drawing's compute-only idle share (t.bubble_fraction) is not a second one [issue 48 §5: 20.9% and 12%]."""
    left, row, top = 70, 24, 20
    scale = (width - left - 10) / t.makespan_s if t.makespan_s > 0 else 1.0
    height = top + t.stages * row + 30
    if bubble is not None and bubble[1] > 0:
        said = f"{bubble[0]:.3g} s, {100 * bubble[0] / bubble[1]:.1f}% of the step, as the step time below prices it"
    else:
        said = f"{100 * t.bubble_fraction:.1f}% idle"
    body = [
        f'<text x="0" y="12" font-weight="bold">stage</text>'
        f'<text x="{left}" y="12">time → (F forward, B backward; gaps are the bubble: {said})</text>'
    ]
    for s in range(t.stages):
        y = top + s * row
        body.append(
            f'<g class="stage-row" data-stage="{s}"><text x="0" y="{y + 15}">stage {s}</text>'
            f'<rect x="{left}" y="{y}" width="{width - left - 10}" height="{row - 4}" fill="#f2f2f2"/></g>'
        )
    for b in t.blocks:
        x = left + b.start_s * scale
        w = max(0.5, (b.end_s - b.start_s) * scale)
        y = top + b.stage * row
        fill = ["#b5de2b", "#6ece58", "#35b779", "#1f9e89"][b.chunk % 4] if b.kind == "F" else "#222"
        body.append(
            f'<rect class="block {b.kind}" x="{x:.2f}" y="{y}" width="{w:.2f}" height="{row - 4}" '
            f'fill="{fill}" stroke="#fff" stroke-width="0.5"><title>{b.kind} mb {b.microbatch} chunk '
            f"{b.chunk}</title></rect>"
        )
        if w > 14:
            body.append(
                f'<text x="{x + w / 2:.1f}" y="{y + 14}" text-anchor="middle" font-size="9" '
                f'fill="{"#fff" if b.kind == "B" else "#000"}">{b.kind}{b.microbatch}</text>'
            )
    note = (
        f"first {t.microbatches} of {t.truncated_from} micro-batches drawn"
        if t.truncated_from
        else (f"{t.microbatches} micro-batches, {t.vp} virtual stage(s) per rank")
    )
    body.append(f'<text x="{left}" y="{height - 8}">{escape(note)}</text>')
    return _svg(width, height, body, f"pipeline timeline: {t.stages} stages", "timeline")


def memory_bars(est: Estimate, width: int = 960) -> str:
    """Per stage, the per-GPU memory parts stacked against the GPU's capacity (dashed line)."""
    left, bar, gap, top = 70, 22, 8, 24
    cap = max(max(s.memory_gb.capacity, s.memory_gb.total) for s in est.stages)
    scale = (width - left - 140) / cap
    height = top + len(est.stages) * (bar + gap) + 40
    body = [f'<text x="0" y="12" font-weight="bold">stage</text><text x="{left}" y="12">per-GPU memory, GB</text>']
    for s in est.stages:
        y = top + s.index * (bar + gap)
        m = s.memory_gb
        body.append(
            f'<g class="mem-bar" data-stage="{s.index}" data-total-gb="{m.total:.3f}" '
            f'data-capacity-gb="{m.capacity:.3f}"><text x="0" y="{y + 15}">stage {s.index}</text>'
        )
        x = float(left)
        for part, fill in MEMORY_PARTS:
            v = getattr(m, part)
            if v <= 0:
                continue
            w = v * scale
            body.append(
                f'<rect class="mem-part" data-part="{part}" data-gb="{v:.3f}" x="{x:.2f}" y="{y}" '
                f'width="{w:.2f}" height="{bar}" fill="{fill}"><title>{part} {v:.2f} GB</title></rect>'
            )
            x += w
        cx = left + m.capacity * scale
        body.append(
            f'<line x1="{cx:.2f}" x2="{cx:.2f}" y1="{y - 3}" y2="{y + bar + 3}" stroke="#c00" '
            f'stroke-width="2" stroke-dasharray="4,2"/>'
        )
        if est.peak_memory_interval_gb is not None and est.peak_memory_gb > 0:  # the stage's upper memory bound
            upper = m.total * est.peak_memory_interval_gb[1] / est.peak_memory_gb
            ux = left + min(upper, cap * 1.15) * scale
            body.append(
                f'<line class="mem-upper" data-upper-gb="{upper:.3f}" x1="{x:.2f}" x2="{ux:.2f}" y1="{y + bar / 2}" '
                f'y2="{y + bar / 2}" stroke="#000" stroke-width="1.5"><title>80% upper bound {upper:.1f} GB</title>'
                "</line>"
            )
            if s.oom_risk:
                x = max(x, ux)
                body.append(f'<text class="oom-risk" x="{x + 6:.2f}" y="{y - 2}" fill="#c00">out-of-memory risk</text>')
        body.append(
            f'<text class="mem-total" x="{max(x, cx) + 6:.2f}" y="{y + 15}">{m.total:.1f} / '
            f"{m.capacity:.0f} GB</text></g>"
        )
    ly = height - 18
    lx = float(left)
    for part, fill in MEMORY_PARTS:
        body.append(
            f'<rect x="{lx}" y="{ly}" width="10" height="10" fill="{fill}" stroke="#000" stroke-width="0.3"/>'
            f'<text x="{lx + 13}" y="{ly + 9}">{part.replace("_", " ")}</text>'
        )
        lx += 13 + 7 * len(part) + 12
    return _svg(width, height, body, f"memory per stage against capacity ({len(est.stages)} stages)", "memory")


def breakdown_bar(parts: dict[str, float], width: int = 960) -> str:
    """The step time as one stacked bar, labelled."""
    total = sum(v for v in parts.values() if v > 0) or 1.0
    scale = (width - 20) / total
    body: list[str] = []
    x = 10.0
    items = [(k, v) for k, v in parts.items() if v > 0]
    for i, (k, v) in enumerate(items):
        w = v * scale
        fill = colour(i, len(items))
        body.append(
            f'<rect class="time-part" data-part="{k}" data-s="{v:.6f}" x="{x:.2f}" y="6" width="{w:.2f}" '
            f'height="24" fill="{fill}"><title>{k} {v:.4f} s</title></rect>'
        )
        if w > 50:
            body.append(f'<text x="{x + 3:.1f}" y="22" fill="{text_colour(fill)}">{escape(k)}</text>')
        x += w
    return _svg(width, 36, body, "step time breakdown", "breakdown")


def prediction_errors(points: list[MeasuredPoint], width: int = 960) -> str:
    """Predicted / measured - 1 of every measurement in time order: the sourced constants (hollow) and the plan's
    own prediction with the calibration it used (filled), against a +-20% band [issue 14]."""
    left, top, plot_h = 60, 14, 200
    height = top + plot_h + 46
    span = 0.5  # the axis runs from -50% to +50%; points beyond sit on the edge with their value in the title
    n = max(1, len(points))
    step = (width - left - 20) / n

    def y_of(err: float) -> float:
        return top + plot_h / 2 - max(-span, min(span, err)) / span * (plot_h / 2)

    body = [f'<text x="0" y="{top + 4}">+50%</text><text x="0" y="{top + plot_h}">-50%</text>']
    for band in (0.2, -0.2):
        body.append(
            f'<line x1="{left}" x2="{width - 20}" y1="{y_of(band):.1f}" y2="{y_of(band):.1f}" stroke="#c00" '
            f'stroke-dasharray="4,2"/>'
        )
    body.append(
        f'<line x1="{left}" x2="{width - 20}" y1="{y_of(0):.1f}" y2="{y_of(0):.1f}" stroke="#000"/>'
        f'<text x="0" y="{y_of(0) + 4:.1f}">0</text>'
    )
    for i, p in enumerate(points):
        x = left + (i + 0.5) * step
        for key, v, filled in (("uncalibrated", p.uncalibrated_s, False), ("planned", p.planned_s, True)):
            if v is None:
                continue
            err = v / p.measured_s - 1
            fill = "#3e4989" if filled else "none"
            body.append(
                f'<circle class="err-point" data-kind="{key}" data-error="{err:.4f}" cx="{x:.1f}" '
                f'cy="{y_of(err):.1f}" r="4" fill="{fill}" stroke="#3e4989"><title>measurement '
                f"{p.measurement_id} (plan {p.plan_id}): {key} {err:+.1%}</title></circle>"
            )
    ly = height - 14
    body.append(
        f'<circle cx="{left + 6}" cy="{ly - 4}" r="4" fill="none" stroke="#3e4989"/>'
        f'<text x="{left + 14}" y="{ly}">sourced constants</text>'
        f'<circle cx="{left + 160}" cy="{ly - 4}" r="4" fill="#3e4989" stroke="#3e4989"/>'
        f'<text x="{left + 168}" y="{ly}">as planned (with its calibration)</text>'
        f'<text x="{left + 420}" y="{ly}">dashed: +-20%; oldest measurement left</text>'
    )
    return _svg(width, height, body, f"prediction error of {len(points)} measurements over time", "errors")
