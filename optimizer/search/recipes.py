"""Published layouts as candidates the search always prices (issue 53 §3): the rows of recipe_table.py that match
a request, scaled to its cluster, priced by `estimate`, and the pick's claimed gain over the best of them with its
80% band and, where the gain exceeds the band, the cost terms the recipe pays that the pick does not."""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator
from dataclasses import dataclass

from optimizer.costmodel.estimate import estimate
from optimizer.costmodel.result import Estimate
from optimizer.costmodel.uncertainty import difference_interval
from optimizer.errors import DomainError
from optimizer.search.decision import Contender
from optimizer.search.explain import describe
from optimizer.search.recipe_table import RECIPES, Recipe
from optimizer.search.space import DEFAULT_VP, SearchSpace
from optimizer.spec.cluster_spec import ClusterSpec, NodePool
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import TrainingWorkload

# The recompute settings a row that leaves recompute unsaid is priced with (the search's own three levels).
OPEN_RECOMPUTE = ("none", "selective", "full")
# Pins name knobs as the search space does; the ParallelConfig field each reads (optimizer/search/space.py KNOBS).
PIN_FIELDS = {"zero": "zero_stage", "sp": "sequence_parallel"}
# Terms the explanation lists of what the recipe pays beyond the pick: the largest three, as explain.py's
# runner-up comparison does.
TERMS_SHOWN = 3


@dataclass(frozen=True, slots=True)
class PricedRecipe:
    """A recipe as the cost model prices it on this request."""

    recipe: Recipe
    config: ParallelConfig
    estimate: Estimate
    scaled: bool
    """Its data parallelism was scaled from the published cluster size to this one."""


@functools.cache
def _preset(name: str) -> ModelSpec:
    return load_model_preset(name)


def is_preset(model: ModelSpec, name: str) -> bool:
    """Whether `model` is the preset `name` (its display name and MTP modules aside: a recipe's layout holds with
    or without the MTP block, whose 'm' the layout string drops when the model has none)."""
    preset = _preset(name)
    return model.model_copy(update={"name": preset.name, "mtp_layers": preset.mtp_layers}) == preset


def matching(model: ModelSpec, cluster: ClusterSpec, w: TrainingWorkload, pools: list[NodePool]) -> list[Recipe]:
    """The rows for this model, GPU, precision and sequence length on one of the allowed pools."""
    gpus = {cluster.gpu_of(p).name for p in pools}
    return [
        r
        for r in RECIPES
        if r.gpu in gpus and r.precision == w.precision and r.seq_len == w.seq_len and is_preset(model, r.model)
    ]


def scaled_dp(r: Recipe, budget: int, gbs: int) -> int | None:
    """The data-parallel degree of `r` on `budget` GPUs: as many replicas of its model-parallel group as fit, the
    most that divides the global batch in micro-batches (None: not one fits)."""
    c = r.config
    group = int(c.get("tp", 1)) * int(c.get("pp", 1)) * int(c.get("cp", 1))  # type: ignore[call-overload]
    mbs = int(c.get("mbs", 1))  # type: ignore[call-overload]
    top = budget // group
    return next((d for d in range(top, 0, -1) if gbs % (d * mbs) == 0), None)


def variants(r: Recipe, model: ModelSpec, dp: int, pool: str) -> Iterator[ParallelConfig]:
    """The configurations of `r` at `dp` on `pool`, one per value of its open knobs."""
    base = dict(r.config)
    layout = base.get("pipeline_layout")
    if isinstance(layout, str) and not model.mtp_layers:
        base["pipeline_layout"] = layout.replace("m", "")
    vps = [int(base.get("vp", 1))] if "vp" not in r.open else list(DEFAULT_VP)  # type: ignore[call-overload]
    rcs = OPEN_RECOMPUTE if "recompute" in r.open else (str(base.get("recompute", "none")),)
    for vp in vps:
        for rc in rcs:
            fields = {**base, "dp": dp, "vp": vp, "recompute": rc, "stage_pools": [pool] * int(base["pp"])}  # type: ignore[call-overload]
            if vp > 1:
                fields["schedule"] = "interleaved-1f1b"
            elif fields.get("schedule") == "interleaved-1f1b":
                continue
            if rc != "selective":
                fields.pop("recompute_modules", None)
            try:
                yield ParallelConfig.model_validate(fields)
            except ValueError:
                continue


def allowed(space: SearchSpace, cfg: ParallelConfig) -> bool:
    """Whether the user's pins and the searched schedules admit `cfg` (a recipe never overrides a pin)."""
    if cfg.schedule not in space.schedules:
        return False
    for knob in space.pins:
        value = cfg.tp if knob == "etp" and cfg.etp is None else getattr(cfg, PIN_FIELDS.get(knob, knob), None)
        if not space.allows(knob, value):
            return False
    return True


@dataclass(frozen=True, slots=True)
class Refused:
    """A matching recipe the cost model does not admit on this request, and why."""

    recipe: Recipe
    reason: str


def price(
    model: ModelSpec,
    cluster: ClusterSpec,
    w: TrainingWorkload,
    space: SearchSpace,
    pools: list[NodePool],
    budget: int,
) -> tuple[list[PricedRecipe], list[Refused]]:
    """Every matching recipe, scaled to `budget` GPUs, at its best variant: the fastest that fits with margin (the
    fastest that fits when none does); the recipes the pins, the framework or the memory refuse, with the reason."""
    out, refused = [], []
    for r in matching(model, cluster, w, pools):
        pool = next(p for p in pools if cluster.gpu_of(p).name == r.gpu)
        dp = scaled_dp(r, min(budget, pool.plannable_gpus), w.global_batch_size)
        if dp is None:
            refused.append(Refused(r, f"its model-parallel group does not fit {budget} GPUs"))
            continue
        best, why = _best_variant(model, cluster, w, space, variants(r, model, dp, pool.name))
        if best is None:
            refused.append(Refused(r, why))
            continue
        cfg, est = best
        if cfg.layers_per_stage is None and cfg.pipeline_layout is None:
            cfg = cfg.model_copy(update={"layers_per_stage": [s.layers for s in est.stages]})
        out.append(PricedRecipe(r, cfg, est, scaled=cfg.gpus != r.gpus))
    return out, refused


def _best_variant(
    model: ModelSpec, cluster: ClusterSpec, w: TrainingWorkload, space: SearchSpace, cfgs: Iterator[ParallelConfig]
) -> tuple[tuple[ParallelConfig, Estimate] | None, str]:
    """The fastest variant that fits with margin, else the fastest that fits; else None and the first reason."""
    best: tuple[tuple[bool, float], ParallelConfig, Estimate] | None = None
    why = "the pins exclude it"
    for cfg in cfgs:
        if not allowed(space, cfg):
            continue
        try:
            est = estimate(model, cluster, w, cfg)
        except (DomainError, ValueError) as exc:
            why = exc.rule if isinstance(exc, DomainError) else str(exc)
            continue
        if not est.feasible:
            why = est.reason or "it does not fit in memory"
            continue
        rank = (any(s.oom_risk for s in est.stages), est.step_time_s)
        if best is None or rank < best[0]:
            best = (rank, cfg, est)
    return (None, why) if best is None else ((best[1], best[2]), "")


def claim_band(pick_objective: float, recipe_objective: float, same_gpu: bool = True) -> tuple[float, float, float]:
    """The pick's claimed gain over the recipe (t_recipe / t_pick - 1) and its 80% band, from the interval of the
    predicted ratio of two configurations of one setup (uncertainty.difference_interval)."""
    ratio = pick_objective / recipe_objective
    low, high = difference_interval(ratio, same_gpu)  # the true ratio pick / recipe
    return 1 / ratio - 1, 1 / high - 1, 1 / low - 1


def terms_paid(pick: Estimate, recipe: Estimate) -> list[tuple[str, float]]:
    """The step-time terms the recipe pays beyond the pick (seconds, largest first)."""
    pb, rb = pick.breakdown.model_dump(), recipe.breakdown.model_dump()
    diffs = sorted(((k, rb.get(k, 0.0) - pb.get(k, 0.0)) for k in rb), key=lambda kv: -kv[1])
    return [(k, d) for k, d in diffs if d > 0][:TERMS_SHOWN]


def claim_text(pick_objective: float, pick: Estimate, r: PricedRecipe, recipe_objective: float, unit: str) -> str:
    """One sentence: the pick against the published recipe, its claimed gain with the band and, beyond the band,
    which terms the recipe pays that the pick does not."""
    gain, lo, hi = claim_band(pick_objective, recipe_objective)
    scaled = f", data parallelism scaled from {r.recipe.gpus:,} to {r.config.gpus:,} GPUs" if r.scaled else ""
    head = (
        f"Against the published recipe {r.recipe.id} ({describe(r.config)}{scaled}; {r.recipe.source}): "
        f"{recipe_objective:.4g} {unit} predicted against the pick's {pick_objective:.4g}, a claimed gain of "
        f"{gain:+.0%} (80% band {lo:+.0%}..{hi:+.0%})"
    )
    if lo <= 0:
        return head + ", within its band."
    paid = terms_paid(pick, r.estimate)
    why = ", ".join(f"{k} +{d:.3g} s" for k, d in paid) or "no single term: the same terms, a larger total"
    return f"{head}, beyond its band: the recipe pays {why} that the pick does not."


# The objective's unit in the explanation's sentences (spec/objectives.py names the objectives).
UNITS = {"step_time": "s per step", "cost": "price per step", "goodput": "wall s per useful step"}


def recipe_note(
    pick: Contender,
    recipes: list[PricedRecipe],
    refused: list[Refused],
    found: list[tuple[float, ParallelConfig, Estimate]],
    objective: str,
    search_optimum: float,
) -> str:
    """What the explanation says of the published recipes: the pick is one (and beats the declared space's
    optimum), or its claimed gain over the best-priced one; or why none runs here."""
    unit = UNITS.get(objective, "")
    if not recipes:
        return " ".join(f"The published recipe {x.recipe.id} does not run here: {x.reason}." for x in refused[:1])
    priced = [(next((o for o, c, _ in found if c == r.config), math.inf), r) for r in recipes]
    own = next((r for o, r in priced if r.config == pick.config), None)
    if own is not None:
        text = f"Picked the published recipe {own.recipe.id} ({own.recipe.source})"
        if pick.objective < search_optimum:
            text += (
                f": faster than the search's optimum over its declared space ({search_optimum:.4g} {unit}, "
                f"{100 * (search_optimum / pick.objective - 1):.1f}% slower)"
            )
        return text + "."
    obj, best = min(priced, key=lambda x: x[0])
    return claim_text(pick.objective, pick.estimate, best, obj, unit)
