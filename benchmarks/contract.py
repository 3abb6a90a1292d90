"""The API against its own OpenAPI document with every schemathesis check (issue 16's contract target: at least
5,000 generated requests, 0 server errors, 0 schema mismatches). Runs the real app in-process on a fresh SQLite
database with a cluster, a model and a plan stored, so that id routes also reach rows. Prints a table.

Run: .venv/bin/python benchmarks/contract.py [--per-operation 140]
"""

from __future__ import annotations

import argparse
import collections
import tempfile
import time
from pathlib import Path
from typing import Any

import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from rich.console import Console
from rich.table import Table
from schemathesis.checks import (
    content_type_conformance,
    missing_required_header,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
    unsupported_method,
)

from api.app import create_app
from store.db import Database
from store.migrate import upgrade
from store.repositories.tokens import TokenRepository
from store.settings import Settings

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
    missing_required_header,
    unsupported_method,
]


def _seed(c: TestClient) -> None:
    from optimizer.spec.model_loading import load_model_preset

    inv = {"pools": [{"name": "h100", "gpu": "H100-SXM-80GB", "nodes": 2, "gpus_per_node": 8}]}
    cluster = c.post("/v1/clusters", json={"name": "seed", "inventory": inv}).json()
    spec = load_model_preset("llama-3-8b").model_dump(mode="json", exclude={"name"})
    model = c.post("/v1/models", json={"name": "seed-model", "spec": spec}).json()
    body = {
        "cluster_id": cluster["id"],
        "model_id": model["id"],
        "workload": {"mode": "training", "global_batch_size": 64, "seq_len": 4096},
        "time_limit_s": 10,
    }
    job = c.post("/v1/jobs", json=body).json()
    deadline = time.monotonic() + 60
    while c.get(f"/v1/jobs/{job['id']}").json()["status"] in ("queued", "running"):
        assert time.monotonic() < deadline
        time.sleep(0.2)


def run_operation(
    op: Any,
    label: str,
    n: int,
    auth: dict[str, str],
    cases: collections.Counter[str],
    failures: collections.Counter[tuple[str, str]],
    examples: dict[tuple[str, str], str],
) -> None:
    """`n` generated requests to one operation with every check; failures counted by check."""

    @given(case=op.as_strategy())
    @settings(max_examples=n, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True, database=None)
    def run(case: Any) -> None:
        cases[label] += 1
        try:
            case.call_and_validate(headers=auth, checks=CHECKS)
        except (Exception, BaseExceptionGroup) as exc:  # a FailureGroup per request: count each failed check
            for f in getattr(exc, "exceptions", [exc]):
                key = (label, str(getattr(f, "title", type(f).__name__)))
                failures[key] += 1
                examples.setdefault(key, str(f).splitlines()[0][:160])

    run()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--per-operation", type=int, default=140)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'contract.db'}"
        upgrade(url)
        db = Database(url)
        with db.session() as s:
            _row, token = TokenRepository(s).create("contract", ["write"])
        cfg = Settings(database_url=url, max_time_limit_s=30, max_page_size=50)
        app = create_app(cfg, db)
        failures: collections.Counter[tuple[str, str]] = collections.Counter()
        examples: dict[tuple[str, str], str] = {}
        cases: collections.Counter[str] = collections.Counter()
        with TestClient(app, raise_server_exceptions=False) as client:
            client.headers["Authorization"] = f"Bearer {token}"
            _seed(client)
            schema = schemathesis.openapi.from_asgi("/openapi.json", app)
            auth = {"Authorization": f"Bearer {token}"}
            t0 = time.perf_counter()
            for result in schema.get_all_operations():
                op = result.ok()  # type: ignore[union-attr]  # an invalid operation fails the run here
                run_operation(op, f"{op.method.upper()} {op.path}", args.per_operation, auth, cases, failures, examples)
            took = time.perf_counter() - t0
    console = Console(width=200)
    table = Table(title=f"schemathesis, every check: {sum(cases.values())} requests in {took:.0f} s")
    for col in ("operation", "check", "failures", "example"):
        table.add_column(col)
    for (label, check), n in sorted(failures.items()):
        table.add_row(label, check, str(n), examples[(label, check)])
    console.print(table)
    by_check = collections.Counter(check for _, check in failures.elements())
    print(f"requests: {sum(cases.values())}; failing requests by check: {dict(by_check)}")


if __name__ == "__main__":
    main()
