"""The pages of a cluster at the node cap (100,000 nodes listed by name, as a scheduler import gives them): the
clusters list (the head revisions' summary columns against building each cluster's API view, which parses its
inventory: what the list did before issue 37 item 4).

Needs PostgreSQL (127.0.0.1:5432); creates and drops its own database.
Run: .venv/bin/python benchmarks/cluster_pages.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fastapi.testclient import TestClient  # noqa: E402

from api.app import create_app  # noqa: E402
from api.convert import cluster_out  # noqa: E402
from api.pages.router import LISTED  # noqa: E402
from benchmarks.service_env import migrated_with_token  # noqa: E402
from optimizer.spec.cluster_spec import MAX_NODES_PER_CLUSTER  # noqa: E402
from store.repositories.clusters import ClusterRepository  # noqa: E402
from store.settings import Settings  # noqa: E402
from tests.databases import create_pg_database, drop_pg_database  # noqa: E402


def timed(fn: Callable[[], Any], repeat: int) -> float:
    """Median milliseconds of `repeat` calls."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(1000 * (time.perf_counter() - t0))
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    url, dbname = create_pg_database()
    db, token = migrated_with_token(url, "bench")
    cfg = Settings(database_url=url, max_time_limit_s=120, max_body_bytes=50_000_000)
    try:
        with TestClient(create_app(cfg, db)) as c:
            c.headers["Authorization"] = f"Bearer {token}"
            nodes = [{"name": f"gpu{i:06d}"} for i in range(MAX_NODES_PER_CLUSTER)]
            pool = {"name": "h100", "gpu": "H100-SXM-80GB", "gpus_per_node": 8, "nodes": nodes}
            r = c.post("/v1/clusters", json={"name": "listed-100k", "inventory": {"pools": [pool]}})
            assert r.status_code == 201, r.text[:300]
            for i in range(3):
                small = {"pools": [{"name": "a", "gpu": "A100-SXM-80GB", "gpus_per_node": 8, "nodes": 4}]}
                assert c.post("/v1/clusters", json={"name": f"small-{i}", "inventory": small}).status_code == 201

            def parsed_views() -> None:
                with db.session() as s:
                    [cluster_out(s, cl) for cl in ClusterRepository(s).page(LISTED).items]

            def summary_rows() -> None:
                with db.session() as s:
                    ClusterRepository(s).listing(LISTED.limit)

            print(f"| clusters list, 4 clusters (one of {MAX_NODES_PER_CLUSTER:,} listed nodes) | median ms |")
            print("|---|---|")
            print(
                f"| each cluster's API view (inventory parsed; the list before) | {timed(parsed_views, a.repeat):.0f} |"
            )
            print(
                f"| head revisions' summary columns (ClusterRepository.listing) | {timed(summary_rows, a.repeat):.1f} |"
            )
            page = timed(lambda: c.get("/clusters").raise_for_status(), a.repeat)
            print(f"| GET /clusters (the page) | {page:.1f} |")
    finally:
        db.dispose()
        drop_pg_database(dbname)


if __name__ == "__main__":
    main()
