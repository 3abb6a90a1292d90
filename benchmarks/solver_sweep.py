"""The planner's speed phase by phase and at scale, before and after, on this machine in one run (issue 49).

Each row runs in a fresh Python process (its wall time includes the imports and loading the specs, its memory is the
process's peak RSS), once on this checkout and once on `--before` (a git ref, unpacked with `git archive` into a
temporary directory and imported from there). Phases come from PlanResult.phase_times_s where the code has them.
The CLI rows time `meshplan --help` and the 530B plan as a shell user runs them (median of --runs).

Run: .venv/bin/python benchmarks/solver_sweep.py [--before dcb4fc7] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]

# (label, model preset, cluster preset, global batch, sequence length, target solve s)
SCENARIOS = [
    ("530B on 5,128 A100 (Calculon's README problem; 5,040 used)", "mt-nlg-530b", "dgx-a100:641", 2520, 2048, 0.4),
    ("405B on 128 H100", "llama-3.1-405b", "dgx-h100:16", 2048, 8192, None),
    ("405B on 2,048 H100", "llama-3.1-405b", "dgx-h100:256", 2048, 8192, None),
    ("405B on 16,384 H100", "llama-3.1-405b", "dgx-h100:2048", 2048, 8192, None),
    ("405B on 131,072 H100", "llama-3.1-405b", "dgx-h100:16384", 2048, 8192, 0.3),
    ("405B on 800,000 H100 (gbs 16,384)", "llama-3.1-405b", "dgx-h100:100000", 16384, 8192, 1.0),
]

# One plan in a fresh process: JSON on stdout. Uses only what both trees have.
PROBE = """
import json, resource, sys, time
t0 = time.perf_counter()
from optimizer.search.planner import plan
from optimizer.spec.cluster_loading import resolve_cluster
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.workload import TrainingWorkload
model, cluster, gbs, seq = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
m, c = load_model_preset(model), resolve_cluster(cluster)
w = TrainingWorkload(global_batch_size=gbs, seq_len=seq)
t1 = time.perf_counter()
r = plan(m, c, w, time_limit_s=120)
t2 = time.perf_counter()
print(json.dumps({
    "status": r.status, "plan_s": t2 - t1, "solve_s": r.solve_time_s, "wall_s": t2 - t0, "import_s": t1 - t0,
    "solved": r.candidates_solved, "phases": getattr(r, "phase_times_s", None) or {},
    "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    "objective": r.objective_value,
}))
"""


def unpack(ref: str, into: Path) -> Path:
    """The tree of `ref` (git archive), unpacked under `into`."""
    data = subprocess.run(["git", "-C", str(ROOT), "archive", ref], check=True, capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into


def probe(tree: Path, args: list[str]) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        cwd=tree,
        env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"},
        check=True,
        capture_output=True,
        text=True,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def cli_wall(tree: Path, args: list[str], runs: int) -> float:
    """Median wall seconds of the CLI (`python -c 'from api.cli import main; main()'` with the tree first on the
    path: the installed `meshplan` script does the same for this checkout)."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-c", "import sys; from api.cli import main; sys.argv[0] = 'meshplan'; main()", *args],
            cwd=tree,
            env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"},
            check=False,
            capture_output=True,
        )
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", default="dcb4fc7", help="git ref of the 'before' code (default: issue 49's start)")
    ap.add_argument("--runs", type=int, default=3, help="runs per plan (the median is shown)")
    ap.add_argument("--only", default=None, help="Scenarios whose label contains this text.")
    args = ap.parse_args()
    load = Path("/proc/loadavg").read_text().split()[0]
    with tempfile.TemporaryDirectory() as tmp:
        before = unpack(args.before, Path(tmp))
        trees = {"before": before, "after": ROOT}
        table = Table(title=f"Planner at scale, {args.before} vs this checkout (median of {args.runs}; load {load})")
        for col in ("scenario", "tree", "status", "plan s", "target", "solved", "process wall s", "peak MB", "phases"):
            table.add_column(col)
        for label, model, cluster, gbs, seq, target in SCENARIOS:
            if args.only and args.only not in label:
                continue
            for name, tree in trees.items():
                rows = [probe(tree, [model, cluster, str(gbs), str(seq)]) for _ in range(args.runs)]
                r = sorted(rows, key=lambda x: float(x["plan_s"]))[len(rows) // 2]  # type: ignore[arg-type]
                phases = r["phases"]
                assert isinstance(phases, dict)
                table.add_row(
                    label if name == "before" else "",
                    name,
                    str(r["status"]),
                    f"{r['plan_s']:.2f}",
                    f"<= {target:g}" if target is not None and name == "after" else "",
                    str(r["solved"]),
                    f"{r['wall_s']:.2f}",
                    f"{r['rss_mb']:.0f}",
                    ", ".join(f"{k} {v:.2f}" for k, v in phases.items()),
                )
        Console(width=250).print(table)
        cli = Table(title="Start-up: the CLI as a shell user runs it (median wall s)")
        for col in ("command", "before", "after", "target"):
            cli.add_column(col)
        plan530 = ["plan", "--model", "mt-nlg-530b", "--cluster", "dgx-a100:641", "--gbs", "2520", "--seq-len", "2048"]
        for cmd, argv, goal in (
            ("meshplan --help", ["--help"], "<= 0.3"),
            ("meshplan plan 530B", plan530, "<= 0.6"),
        ):
            cli.add_row(cmd, f"{cli_wall(before, argv, args.runs):.2f}", f"{cli_wall(ROOT, argv, args.runs):.2f}", goal)
        Console(width=250).print(cli)
        print("Calculon on its own problem (530B, 5,128 A100): 66 s (issue 49's measurement on this machine type).")


if __name__ == "__main__":
    main()
