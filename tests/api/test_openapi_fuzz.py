"""Schemathesis against the app's own OpenAPI document: no generated request gets a server error, and every
route documents its error responses."""

from __future__ import annotations

import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error


def test_every_route_documents_its_errors(client: TestClient) -> None:
    doc = client.get("/openapi.json").json()
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            codes = set(op["responses"])
            if path.startswith("/v1/"):
                assert {"401", "403", "422", "503"} <= codes, (method, path, codes)
            if "{" in path and path.startswith("/v1/"):
                assert "404" in codes, (method, path)
            for code, resp in op["responses"].items():
                if code.startswith(("4", "5")) or code in ("200", "201", "202"):
                    assert resp.get("content") or code == "204", (method, path, code)


def test_no_server_error(client: TestClient, tokens: dict[str, str]) -> None:
    """Every operation, 15 generated requests each (derandomized: the same requests every run)."""
    schema = schemathesis.openapi.from_asgi("/openapi.json", client.app)
    auth = {"Authorization": f"Bearer {tokens['write']}"}
    operations = [r.ok() for r in schema.get_all_operations()]
    assert len(operations) >= 30

    for op in operations:

        @given(case=op.as_strategy())
        @settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
        def run(case: schemathesis.Case) -> None:
            case.call_and_validate(headers=auth, checks=[not_a_server_error])

        run()
