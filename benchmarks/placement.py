"""Placements: one on a fragmented GB200 cluster (the TP groups' NVLink domains, what it gives up and what that
costs against the same plan on an unfragmented cluster), and how long placing takes as plans grow. Prints tables.

Run: .venv/bin/python benchmarks/placement.py
"""

from __future__ import annotations

import statistics
import time

from rich.console import Console
from rich.table import Table

from optimizer.costmodel.estimate import estimate
from optimizer.placement.place import place
from optimizer.placement.priced import placed_estimate
from optimizer.spec.cluster_loading import build_cluster, load_cluster_preset
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import TrainingWorkload

# One tray drained in each of four 16-tray NVL racks (15 healthy each), or all four from the last rack.
FRAGMENTED = {"nvl-003": "drained", "nvl-020": "drained", "nvl-037": "drained", "nvl-054": "drained"}
LAST_RACK = {"nvl-060": "drained", "nvl-061": "drained", "nvl-062": "drained", "nvl-063": "drained"}


def gb200(states: dict[str, str]) -> ClusterSpec:
    """64 GB200 trays (4 GPUs each) in four 64-GPU NVLink domains, 32 trays per leaf switch, 2:1 between leaves."""
    pool = {
        "name": "nvl",
        "gpu": "GB200-186GB",
        "nodes": 64,
        "gpus_per_node": 4,
        "intra_node": {"kind": "nvlink", "gbytes_per_s": 900, "domain_size": 64},
        "inter_node": {"nics_per_node": 4, "gbits_per_s": 400},
        "pod_size": 32,
        "oversubscription": 2.0,
        "node_states": states,
    }
    return build_cluster({"name": "gb200", "pools": [pool]})


def fragmented(out: Console) -> None:
    model = load_model_preset("llama-3-70b")
    w = TrainingWorkload(global_batch_size=480, seq_len=8192)
    cfg = ParallelConfig(tp=8, pp=2, dp=15, sequence_parallel=True, zero_stage=1)
    frag = gb200(FRAGMENTED)
    pe = placed_estimate(model, frag, w, cfg)
    p = pe.placement
    t = Table(title=f"llama-3-70b tp8 pp2 dp15 on 64 GB200 trays, drained {sorted(FRAGMENTED)}: the TP groups")
    for col in ("TP group", "ranks", "stage", "hosts", "NVLink domain"):
        t.add_column(col)
    hosts = p.rank_hosts()
    for g, domain in enumerate(p.tp_domains):
        names = list(dict.fromkeys(hosts[r][0] for r in range(g * p.tp, (g + 1) * p.tp)))
        t.add_row(
            str(g),
            f"{g * p.tp}-{(g + 1) * p.tp - 1}",
            str(g * p.tp // p.gpus_per_stage),
            ", ".join(names),
            domain + ("  <- split" if " + " in domain else ""),
        )
    out.print(t)
    for d in p.degraded:
        out.print(f"degraded: {d}")
    ideal = estimate(model, frag, w, cfg)
    whole = placed_estimate(model, gb200(LAST_RACK), w, cfg)
    s = Table(title="The same plan priced")
    for col in ("placement", "step s", "tp_comm s", "pp_comm s", "dp_comm s"):
        s.add_column(col)
    for name, e in (
        ("fragmented, as placed", pe.estimate),
        ("fragmented, idealised fabric", ideal),
        ("last rack drained, as placed", whole.estimate),
    ):
        b = e.breakdown
        s.add_row(name, f"{e.step_time_s:.3f}", f"{b.tp_comm:.3f}", f"{b.pp_comm:.3f}", f"{b.dp_comm:.3f}")
    out.print(s)
    out.print(f"last rack drained: degraded {whole.placement.degraded}")


def speed(out: Console) -> None:
    t = Table(title="Placing a plan (median of 5)")
    for col in ("plan", "ranks", "hosts", "ms"):
        t.add_column(col)
    doc = load_cluster_preset("dgx-h100:2050").model_dump(mode="json")
    doc["pools"][0]["node_states"] = {"dgx-h100-0007": "drained"}
    drained = build_cluster(doc)
    for label, preset, cfg in (
        ("tp8 pp2 dp2 on 4 DGX H100", "dgx-h100:4", ParallelConfig(tp=8, pp=2, dp=2)),
        ("tp8 pp8 dp16 on 128 DGX H100", "dgx-h100:128", ParallelConfig(tp=8, pp=8, dp=16)),
        ("tp4 pp4 dp16 ep16 on 64 GB200 trays", "gb200-nvl72:64", ParallelConfig(tp=4, pp=4, dp=16, ep=16, etp=1)),
        (
            "tp8 pp16 dp128 vp2 on 2,048 DGX H100",
            "dgx-h100:2048",
            ParallelConfig(tp=8, pp=16, dp=128, vp=2, schedule="interleaved-1f1b"),
        ),
        (
            "the same on 2,050 DGX H100, one drained",
            drained,
            ParallelConfig(tp=8, pp=16, dp=128, vp=2, schedule="interleaved-1f1b"),
        ),
    ):
        cluster = load_cluster_preset(preset) if isinstance(preset, str) else preset
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            p = place(cluster, cfg).placement
            times.append(time.perf_counter() - t0)
        t.add_row(label, str(p.world_size), str(len(p.hosts)), f"{1000 * statistics.median(times):.1f}")
    out.print(t)


def main() -> None:
    out = Console(width=160)
    fragmented(out)
    speed(out)


if __name__ == "__main__":
    main()
