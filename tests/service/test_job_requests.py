"""A job's submission: idempotent, and a bad request names its field and stores nothing."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from optimizer.errors import DomainError
from service.jobs import submit
from store.errors import ConflictError
from store.models import Job
from tests.factories import cluster_and_model, training_request


def test_idempotency_key_same_body_same_job_other_body_conflict(session: Session) -> None:
    cluster, model = cluster_and_model(session)
    job, created = submit(session, training_request(cluster, model), client="alice", idempotency_key="k1")
    again, created2 = submit(session, training_request(cluster, model), client="alice", idempotency_key="k1")
    assert created and not created2 and again.id == job.id
    other, created3 = submit(session, training_request(cluster, model), client="bob", idempotency_key="k1")
    assert created3 and other.id != job.id  # keys are unique per client
    with pytest.raises(ConflictError) as err:
        submit(session, training_request(cluster, model, gbs=128), client="alice", idempotency_key="k1")
    assert err.value.field == "Idempotency-Key"


def test_bad_job_input_names_the_field_and_stores_nothing(session: Session) -> None:
    cluster, model = cluster_and_model(session)
    n = session.scalar(select(func.count()).select_from(Job))
    with pytest.raises(DomainError) as err:
        submit(session, training_request(cluster, model, search={"pins": ["tp=3"]}))
    assert err.value.field == "pin.tp" and "num_attention_heads=32" in err.value.rule
    with pytest.raises(DomainError) as err:
        submit(session, training_request(cluster, model, time_limit_s=0.01))
    assert err.value.field == "time_limit"
    with pytest.raises(DomainError) as err:
        submit(session, training_request(cluster, model, search={"pins": ["tp=banana"]}))
    assert err.value.field.startswith("search.pin")
    assert session.scalar(select(func.count()).select_from(Job)) == n
