"""Schemathesis' stateful run over the document's OpenAPI links [issue 47 item 3]: from a submitted job to its
plan, the plan to its measurements (and their deletion), a watch to its re-plan. Each step is a request the schema
generates, its ids taken from the answer the link starts from; the run's cluster and model are real ones (the body
fields a link cannot carry from another answer), a job is a configuration reported as run (a plan without a search,
so the run takes seconds), a job is waited for before its plan is read, and a measurement is a step time (the link
under test is its plan's id). Every answer is checked as in test_openapi_fuzz: no server error, a documented status,
a conforming body. About 20 s on this machine."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings
from schemathesis import GenerationMode
from schemathesis.config._phases import InferenceConfig  # not re-exported by schemathesis.config

from api.app import create_app
from store.db import Database
from store.repositories.tokens import TokenRepository
from store.settings import Settings
from tests.api.helpers import TRAINING, make_cluster, make_model, name, wait_job
from tests.api.test_openapi_fuzz import CONFORMANCE
from tests.databases import migrated_pg_database

# The operations on the links' chains, one walk per chain so that the walk's steps stay on it: job -> plan ->
# measurements (and their deletion), watch -> re-plan; without the lists and the deletions of jobs and watches, which
# would only shorten the chains.
RAN = {"tp": 8, "pp": 1, "dp": 2, "sequence_parallel": True}
IDS = {"job_id", "plan_id", "watch_id", "measurement_id"}
NO_SUCH_ID = 2_000_000_000
JOB_CHAIN = r"^/v1/jobs$|^/v1/jobs/\{job_id\}$|^/v1/plans/\{plan_id\}(/measurements(/\{measurement_id\})?)?$"
WATCH_CHAIN = r"^/v1/watches$|^/v1/watches/\{watch_id\}(/replan)?$"


@pytest.fixture
def own(api_settings: Settings) -> Iterator[tuple[TestClient, dict[str, str]]]:
    """An app and a database of the test's own: a walk's answers then depend on nothing another test left. On the
    session's app and database the same draws met other ids and jobs, and Hypothesis refused the run as flaky
    (FlakyStrategyDefinition in two full serial passes of three; alone it passed every time)."""
    with migrated_pg_database() as url:
        db = Database(url)
        with db.session() as s:
            _row, write = TokenRepository(s).create("stateful", ["write"])
        try:
            app = create_app(api_settings.model_copy(update={"database_url": url}), db)
            with TestClient(app, raise_server_exceptions=False) as client:
                client.headers["Authorization"] = f"Bearer {write}"
                yield client, {"write": write}
        finally:
            db.dispose()


def test_the_links_lead_from_a_job_to_its_plan_and_measurements(own: tuple[TestClient, dict[str, str]]) -> None:
    client, tokens = own
    doc = client.get("/openapi.json").json()
    assert "GetPlan" in doc["paths"]["/v1/jobs/{job_id}"]["get"]["responses"]["200"]["links"]
    ok = _walk(client, tokens, JOB_CHAIN, examples=20)
    assert ("GET", "/v1/plans/{plan_id}") in ok, sorted(ok)
    assert ("POST", "/v1/plans/{plan_id}/measurements") in ok, sorted(ok)
    assert ("DELETE", "/v1/plans/{plan_id}/measurements/{measurement_id}") in ok, sorted(ok)


def test_the_links_lead_from_a_watch_to_its_replan(own: tuple[TestClient, dict[str, str]]) -> None:
    client, tokens = own
    ok = _walk(client, tokens, WATCH_CHAIN, examples=6)  # two steps deep; each re-plan solves
    assert ("GET", "/v1/watches/{watch_id}") in ok, sorted(ok)
    assert ("POST", "/v1/watches/{watch_id}/replan") in ok, sorted(ok)


def _walk(client: TestClient, tokens: dict[str, str], chain: str, examples: int) -> set[tuple[str, str]]:
    """Schemathesis' stateful run over the operations matching `chain`; the (method, path) pairs answered 2xx."""
    schema = (
        schemathesis.openapi.from_asgi("/openapi.json", client.app)
        .include(path_regex=chain)
        .exclude(method="GET", path_regex=r"^/v1/(jobs|watches)$|/measurements$")
        .exclude(method="DELETE", path_regex=r"^/v1/(jobs|watches)/")
    )
    # Positive requests only: the links are under test here (test_openapi_fuzz sends the negative ones). A negative
    # step drops the bearer token or breaks a body, which ends the chain it is on: about a step in five answered 401,
    # and whether a job's chain reached its plan then depended on the scenario draws.
    schema.config.generation.update(modes=[GenerationMode.POSITIVE])
    # The document's own links only, not the ones schemathesis infers from field names: it linked the 202 of
    # POST /v1/jobs to the plan operations through the answer's plan_id, which is null or set by whether the
    # reported job finished before the answer was written; the same draws then met different operations, and
    # Hypothesis refused the run as flaky (FlakyStrategyDefinition in two fresh-clone serial passes of three).
    schema.config.phases.stateful.inference = InferenceConfig(algorithms=[])
    auth = {"Authorization": f"Bearer {tokens['write']}"}
    cluster, model = make_cluster(client), make_model(client)
    reached: set[tuple[str, str, int]] = set()

    class Run(schema.as_state_machine()):  # type: ignore[misc]
        def setup(self) -> None:
            self.produced: set[int] = set()  # the ids this scenario's answers gave (what its links carry)

        def before_call(self, case: Any) -> None:
            path, method = case.operation.path, case.method.upper()
            # An id the scenario did not get from an answer names no object (a generated 1 would name an object an
            # earlier scenario left, making the runs depend on each other, which Hypothesis refuses as flaky).
            params = case.path_parameters if isinstance(case.path_parameters, dict) else {}
            for key in IDS & set(params):
                if params[key] not in self.produced:
                    params[key] = NO_SUCH_ID
            ids = {"cluster_id": cluster["id"], "model_id": model["id"]}
            if (method, path) == ("POST", "/v1/jobs"):  # a configuration reported as run: a plan without a search
                case.body = {**ids, "workload": TRAINING, "search": {"ran": RAN}}
            elif (method, path) == ("POST", "/v1/watches"):
                case.body = {**ids, "name": name("w"), "workload": TRAINING}
            elif (method, path) == ("GET", "/v1/jobs/{job_id}") and isinstance(case.path_parameters, dict):
                job_id = case.path_parameters.get("job_id")
                if isinstance(job_id, int) and client.get(f"/v1/jobs/{job_id}").status_code == 200:
                    wait_job(client, job_id)  # the link to its plan follows a finished job
            elif (method, path) == ("POST", "/v1/plans/{plan_id}/measurements"):
                # a measured step time of the linked plan (a generated one names a configuration or figures its
                # plan's rules refuse: the link under test is the plan's id)
                case.query, case.body = {"cluster_id": cluster["id"]}, {"step_time_s": 2.0}

        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            return {"headers": auth}

        def after_call(self, response: Any, case: Any) -> None:
            reached.add((case.method.upper(), case.operation.path, response.status_code))
            body = response.json() if 200 <= response.status_code < 300 and response.content else None
            if isinstance(body, dict):
                self.produced |= {v for k, v in body.items() if k in ("id", "plan_id") and isinstance(v, int)}

        def validate_response(self, response: Any, case: Any, additional_checks: Any = None, **kwargs: Any) -> None:
            case.validate_response(response, checks=CONFORMANCE)

    Run.run(
        settings=settings(
            max_examples=examples,
            stateful_step_count=10,
            deadline=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        )
    )
    return {(m, p) for m, p, status in reached if 200 <= status < 300}
