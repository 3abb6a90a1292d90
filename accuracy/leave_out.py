"""Leave-one-group-out residuals of the published runs: the errors the cost model makes on a source it has never seen,
the basis of every estimate's 80% interval (optimizer/costmodel/uncertainty.py, docs/uncertainty.md).

A group is one source (`group` in accuracy/data/published_runs.json). Constants fitted on the published runs are
refit without the left-out group (REFITS): every affected record is predicted once on a grid of the constant's
values; a fold fits the sum of squared log errors over the other fit groups' records (log predictions interpolated
between grid points) and moves the shipped value by the difference between that fit and the same fit over all the fit
groups (the left-out group's influence, whatever criterion chose the shipped value); the left-out group's records
take their predictions at the fold's value. A constant fitted only on the left-out group is fitted on the other
groups' records it affects, or takes its prior (the value without that calibration) where none remains. Constants not
refit are listed in HELD.

Run: .venv/bin/python -m accuracy.leave_out [--write]   (--write refreshes optimizer/costmodel/residuals.json)
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

import optimizer.costmodel as costmodel_package
from accuracy.pair_errors import pair_section
from accuracy.published_runs import CalibrationCase, Record, framework_of, load_records, pinned_setting, predict
from accuracy.serving_runs import load_serving_records, run_serving
from optimizer.costmodel import cost_context, framework_runtime
from optimizer.costmodel.constants import (
    FLASH_ATTENTION_EFFICIENCY,
    FRAMEWORK_FACTOR,
    MOE_EAGER_HOST_S,
    TORCHAO_ROWWISE_FP8_RATE,
)
from optimizer.costmodel.terms import expert_parallel
from optimizer.costmodel.uncertainty import RunFeatures, parse_residuals, training_features
from optimizer.frameworks import releases

RESIDUALS_PATH = Path(costmodel_package.__file__).parent / "residuals.json"
# Points between the grid's ends at which each fold's sum of squared log errors is evaluated.
FINE_POINTS = 2001


@dataclass(frozen=True)
class Refit:
    """One constant fitted on the published runs, refit per left-out group."""

    name: str
    shipped: float
    grid: tuple[float, ...]
    fit_groups: frozenset[str]
    """The groups its source comment says it was fitted on."""
    prior: float
    """Its value when no record remains to fit it."""
    fallback: Callable[[Record], bool]
    """Records of other groups it may affect: fitted on when the fit groups minus the left-out one are empty."""
    patch: Callable[[float], contextlib.AbstractContextManager[None]]
    source: str


@contextlib.contextmanager
def _framework_factor(family: str, value: float) -> Iterator[None]:
    old = FRAMEWORK_FACTOR[family]
    FRAMEWORK_FACTOR[family] = value
    try:
        yield
    finally:
        FRAMEWORK_FACTOR[family] = old


def _imported(module: ModuleType, name: str) -> Callable[[float], contextlib.AbstractContextManager[None]]:
    """A patch of constant `name` where `module` reads it (the name it imported from constants)."""

    @contextlib.contextmanager
    def patch(value: float) -> Iterator[None]:
        namespace = vars(module)
        old = namespace[name]
        namespace[name] = value
        try:
            yield
        finally:
            namespace[name] = old

    return patch


@contextlib.contextmanager
def _zero3_overlap(value: float) -> Iterator[None]:
    old = framework_runtime.RUNTIME_TABLE["deepspeed"]
    framework_runtime.RUNTIME_TABLE["deepspeed"] = dataclasses.replace(old, zero3_overlap=value)
    try:
        yield
    finally:
        framework_runtime.RUNTIME_TABLE["deepspeed"] = old


BLACKWELL_ATTENTION_SHIPPED = 0.8
_BLACKWELL_PAIR = FLASH_ATTENTION_EFFICIENCY["fa3"]["blackwell"]


@contextlib.contextmanager
def _blackwell_attention(value: float) -> Iterator[None]:
    """The Blackwell fa3 pair scaled as `value` x the Hopper pair (the shipped pair at the shipped 0.8)."""
    scale = value / BLACKWELL_ATTENTION_SHIPPED
    FLASH_ATTENTION_EFFICIENCY["fa3"]["blackwell"] = (_BLACKWELL_PAIR[0] * scale, _BLACKWELL_PAIR[1] * scale)
    try:
        yield
    finally:
        FLASH_ATTENTION_EFFICIENCY["fa3"]["blackwell"] = _BLACKWELL_PAIR


@contextlib.contextmanager
def _torchtitan_002_compute(value: float) -> Iterator[None]:
    """torchtitan 0.0.2's release compute factor (frameworks/releases.py TORCHTITAN_002_COMPUTE) set to `value`."""
    old = releases.RELEASES
    releases.RELEASES = tuple(
        dataclasses.replace(r, compute_factor=value) if (r.framework, r.version) == ("torchtitan", "0.0.2") else r
        for r in old
    )
    try:
        yield
    finally:
        releases.RELEASES = old


def _grid(lo: float, hi: float, step: float, shipped: float) -> tuple[float, ...]:
    n = round((hi - lo) / step)
    return tuple(sorted({round(lo + i * step, 10) for i in range(n + 1)} | {shipped}))


def _is_moe(rec: Record) -> bool:
    return bool(rec["model"].get("moe"))


def _framework_factor_refit(family: str, groups: tuple[str, ...], prior_family: str, source: str) -> Refit:
    """FRAMEWORK_FACTOR[family], fitted on `groups`; with none of them left, the other fitted family's value."""
    return Refit(
        name=f"FRAMEWORK_FACTOR['{family}']",
        shipped=FRAMEWORK_FACTOR[family],
        grid=_grid(0.55, 1.0, 0.02, FRAMEWORK_FACTOR[family]),
        fit_groups=frozenset(groups),
        prior=FRAMEWORK_FACTOR[prior_family],
        fallback=lambda rec: False,  # every fold keeps four of its five groups
        patch=lambda v: _framework_factor(family, v),
        source=source,
    )


REFITS: tuple[Refit, ...] = (
    _framework_factor_refit(
        "hopper",
        (
            "megatron_lm_readme_2024_h100_weak_scaling",
            "mosaicml_fsdp_h100",
            "nemo2412_h100_fp8",
            "megatron_bridge_h100_fp8",
            "nemo_automodel_h100_fsdp2",
        ),
        "ampere",
        "constants.py: the 33 dense H100 training records (Megatron-Core, MosaicML, NeMo 24.12, Megatron-Bridge, "
        "NeMo AutoModel)",
    ),
    _framework_factor_refit(
        "ampere",
        (
            "narayanan2021_table1_weak_scaling",
            "narayanan2021_table2_ptdp",
            "korthikanti2022_table5",
            "korthikanti2022_dp_scaling",
            "korthikanti2022_table4_per_layer",
        ),
        "hopper",
        "constants.py: Narayanan 2021 and Korthikanti 2022 (Megatron on A100)",
    ),
    Refit(
        name="MOE_EAGER_HOST_S",
        shipped=MOE_EAGER_HOST_S,
        grid=_grid(0.0, 0.012, 0.0005, MOE_EAGER_HOST_S),
        fit_groups=frozenset({"megatron_bridge_h100_fp8_moe"}),
        prior=0.0,
        fallback=_is_moe,
        patch=_imported(expert_parallel, "MOE_EAGER_HOST_S"),
        source="constants.py: the H100 MoE records (megatron_bridge_h100_fp8_moe); prior 0: the term absent",
    ),
    Refit(
        name="DEEPSPEED.zero3_overlap",
        shipped=framework_runtime.DEEPSPEED.zero3_overlap,
        grid=_grid(0.0, 1.0, 0.05, framework_runtime.DEEPSPEED.zero3_overlap),
        fit_groups=frozenset({"narayanan2021_table2_zero3"}),
        prior=framework_runtime.MEGATRON.zero3_overlap,
        fallback=lambda rec: framework_of(rec) == "deepspeed" and rec["parallel"].get("zero_stage") == 3,
        patch=_zero3_overlap,
        source="framework_runtime.py: Narayanan 2021 Table 2 ZeRO-3; prior 1.0: the other frameworks' full overlap",
    ),
    Refit(
        name="FLASH_ATTENTION_EFFICIENCY fa3 blackwell (x Hopper pair)",
        shipped=BLACKWELL_ATTENTION_SHIPPED,
        grid=_grid(0.5, 1.2, 0.05, BLACKWELL_ATTENTION_SHIPPED),
        fit_groups=frozenset({"nemo2504_b200_long_sequence", "megatron_bridge_blackwell"}),
        prior=1.0,
        fallback=lambda rec: False,
        patch=_blackwell_attention,
        source="constants.py: NeMo 25.04 B200 long-sequence table and Megatron-Bridge's dense Blackwell rows; "
        "prior 1.0: the Hopper pair",
    ),
)

# The torchao float8 README's two terms (issue 45), each fitted on that source alone: left out, they take their prior.
REFITS = (
    *REFITS,
    Refit(
        name="torchtitan 0.0.2 compute_factor (releases.py TORCHTITAN_002_COMPUTE)",
        shipped=releases.TORCHTITAN_002_COMPUTE,
        grid=_grid(0.5, 1.1, 0.02, releases.TORCHTITAN_002_COMPUTE),
        fit_groups=frozenset({"torchao_float8_h100"}),
        prior=1.0,
        fallback=lambda rec: framework_of(rec) == "torchtitan" and rec.get("framework_version") == "0.0.2",
        patch=_torchtitan_002_compute,
        source="releases.py: the torchao float8 README's bf16 row; prior 1.0: the fitted Hopper constant",
    ),
    Refit(
        name="TORCHAO_ROWWISE_FP8_RATE",
        shipped=TORCHAO_ROWWISE_FP8_RATE,
        grid=_grid(0.5, 1.1, 0.02, TORCHAO_ROWWISE_FP8_RATE),
        fit_groups=frozenset({"torchao_float8_h100"}),
        prior=1.0,
        fallback=lambda rec: rec.get("fp8_recipe") == "rowwise",
        patch=_imported(cost_context, "TORCHAO_ROWWISE_FP8_RATE"),
        source="constants.py: the torchao float8 README's rowwise / tensorwise pair; prior 1.0: tensorwise's rate",
    ),
)

# Constants fitted or checked on published runs that the folds do NOT refit (they keep their shipped value in every
# fold, so the residuals of the groups they used are optimistic).
HELD: tuple[tuple[str, str], ...] = (
    ("FRAMEWORK_FACTOR['volta']", "Ampere's value, not fitted on the V100 records (no refit needed)"),
    ("FRAMEWORK_FACTOR_DEFAULT", "other families; not fitted on any record here"),
    ("OVERLAP_COMPUTE_SLOWDOWN", "Lee et al. 2025 average; adopted after a check on the H100 records"),
    ("FLASH_ATTENTION_EFFICIENCY fa2 hopper", "FlashAttention-3 paper figures; checked on nemo2403_h100_long_sequence"),
    ("GB300 / B300 mamf_fraction (gpu_catalog.py)", "derived from Megatron-Bridge GB300 / GB200 pairs"),
    ("TORCHTITAN_ASYNC_TP_SHARE", "fitted on torchtitan async-TP pairs outside this table"),
    ("FRAGMENTATION_FRACTION, TRAINING_SLACK_CAP_BYTES", "bounded by torchtitan2412_h100_memory (memory records)"),
    (
        "DECODE_ATTENTION_HBM_SHARE, ENGINE_ITERATION_OVERHEAD_S",
        "fitted per engine on all serving rows at once (not per source): serving residuals are in-sample",
    ),
)


def _log_preds(refit: Refit, records: list[Record]) -> dict[str, np.ndarray]:
    """Log prediction of each record at every grid value (records it does not affect or cannot price dropped)."""
    out: dict[str, list[float]] = {r["id"]: [] for r in records}
    for value in refit.grid:
        with refit.patch(value):
            for rec in records:
                case = predict(rec)
                out[rec["id"]].append(math.log(case.predicted) if case is not None else math.nan)
    arrays = {k: np.array(v) for k, v in out.items()}
    return {k: a for k, a in arrays.items() if np.all(np.isfinite(a)) and np.ptp(a) > 1e-12}


def _fit(refit: Refit, logs: dict[str, np.ndarray], measured: dict[str, float], ids: list[str]) -> float:
    """The value minimising the sum of squared log errors over `ids` (interpolated between grid points)."""
    ids = [i for i in ids if i in logs]
    if not ids:
        return refit.prior
    grid = np.array(refit.grid)
    fine = np.linspace(grid[0], grid[-1], FINE_POINTS)
    sse = sum((np.interp(fine, grid, logs[i]) - math.log(measured[i])) ** 2 for i in ids)
    return float(fine[int(np.argmin(sse))])


def _features(rec: Record, case: CalibrationCase) -> RunFeatures | None:
    if case.run is not None:
        return training_features(case.run.model, case.run.cluster, case.run.workload, case.run.config)
    if case.metric.startswith(("peak_allocated_gb", "peak_reserved_gb")):
        return training_features(*pinned_setting(rec))
    return None


def _metric(case: CalibrationCase) -> str:
    return case.metric.split(" ")[0]


def leave_out_table() -> dict[str, Any]:
    """The residual table: in-sample and left-out log residual of every scored figure, with what was refit."""
    records = load_records()
    cases = {r["id"]: (r, c) for r in records if (c := predict(r)) is not None}
    measured = {rid: c.measured for rid, (_, c) in cases.items()}
    groups = sorted({c.group for _, c in cases.values()})
    deltas: dict[str, float] = dict.fromkeys(cases, 0.0)
    refit_meta = []
    for refit in REFITS:
        candidates = [r for rid, (r, c) in cases.items() if c.group in refit.fit_groups or refit.fallback(r)]
        logs = _log_preds(refit, candidates)
        grid = np.array(refit.grid)
        in_fit = [rid for rid in logs if cases[rid][1].group in refit.fit_groups]
        fit_all = _fit(refit, logs, measured, in_fit)
        folds: dict[str, float] = {}
        for g in sorted(refit.fit_groups & set(groups)):
            ids = [rid for rid in in_fit if cases[rid][1].group != g]
            if ids:  # the shipped value moved by what leaving g out moves the least-squares fit
                value = refit.shipped + _fit(refit, logs, measured, ids) - fit_all
            else:  # fitted on this group alone: the other groups' records it affects, else the prior
                value = _fit(refit, logs, measured, [rid for rid in logs if cases[rid][1].group != g])
            folds[g] = value = min(max(value, refit.grid[0]), refit.grid[-1])
            for rid in logs:
                if cases[rid][1].group == g:
                    deltas[rid] += float(np.interp(value, grid, logs[rid]) - np.interp(refit.shipped, grid, logs[rid]))
        refit_meta.append(
            {
                "name": refit.name,
                "shipped": refit.shipped,
                "fit_all_groups": fit_all,
                "prior": refit.prior,
                "fit_groups": sorted(refit.fit_groups),
                "records_affected": len(logs),
                "fold_values": folds,
                "source": refit.source,
            }
        )
    rows = []
    for rid, (rec, case) in cases.items():
        feats = _features(rec, case)
        in_sample = math.log(case.measured / case.predicted)
        rows.append(
            {
                "id": rid,
                "group": case.group,
                "metric": _metric(case),
                "predicted": case.predicted,
                "measured": case.measured,
                "in_sample": in_sample,
                "left_out": in_sample - deltas[rid],
                "features": feats.to_json() if feats else None,
                "engine": "trtllm" if case.metric.startswith("first_token_latency_s") else None,
            }
        )
    rows.extend(_serving_rows())
    return {
        "meta": {
            "generator": ".venv/bin/python -m accuracy.leave_out --write",
            "residual": "log(measured / predicted); left_out: constants fitted on the record's group refit without it",
            "fit_method": "least squares on log predictions interpolated over the grid (accuracy/leave_out.py)",
            "refit": refit_meta,
            "held": [{"name": n, "why": w} for n, w in HELD],
        },
        "records": rows,
        "pairs": pair_section(parse_residuals({"records": rows})),
    }


def _serving_rows() -> list[dict[str, Any]]:
    """Serving figures (accuracy/data/serving_runs.json): no constant fitted per source, so left-out = in-sample."""
    _, records = load_serving_records()
    engine = {r["id"]: r["engine"] for r in records}
    rows = []
    for case in run_serving():
        if not (0 < case.predicted < math.inf):
            continue
        res = math.log(case.measured / case.predicted)
        rows.append(
            {
                "id": case.id,
                "group": case.group,
                "metric": case.metric,
                "predicted": case.predicted,
                "measured": case.measured,
                "in_sample": res,
                "left_out": res,
                "features": None,
                "engine": engine[case.id],
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--write", action="store_true", help=f"write {RESIDUALS_PATH}")
    args = parser.parse_args()
    table = leave_out_table()
    for r in table["meta"]["refit"]:
        print(
            f"{r['name']}: shipped {r['shipped']:g}, fit on all its groups {r['fit_all_groups']:.4g}, "
            f"{r['records_affected']} records; folds " + ", ".join(f"{g} {v:.4g}" for g, v in r["fold_values"].items())
        )
    if args.write:
        RESIDUALS_PATH.write_text(json.dumps(table, indent=1) + "\n")
        print(f"wrote {RESIDUALS_PATH} ({len(table['records'])} figures, {len(table['pairs']['records'])} pairs)")


if __name__ == "__main__":
    main()
