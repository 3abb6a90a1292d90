"""/v1/clusters/{id}/acceptance-tests: a pool's nccl-tests and GEMM sweep outputs as their tools printed them,
compared with the cost model's sourced figures; the cluster's calibration starts from them [issue 33]."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Query, Response

from api.convert import acceptance_out
from api.deps import Reader, RowId, SessionDep, Writer
from api.responses import NOT_FOUND, STANDARD, WRITE
from api.schemas import AcceptanceTestOut
from optimizer.calibration.acceptance import Kind
from optimizer.calibration.nccl_tests import Collective
from service.acceptance import list_tests, record_test

router = APIRouter(tags=["acceptance tests"], responses=STANDARD)
OutputText = Annotated[
    str,
    Body(media_type="text/plain", description="The output as printed: nccl-tests (*_perf) or mamf-finder.py."),
]


@router.post(
    "/v1/clusters/{cluster_id}/acceptance-tests", status_code=201, response_model=AcceptanceTestOut, responses=WRITE
)
def add(
    cluster_id: RowId,
    s: SessionDep,
    _: Writer,
    body: OutputText,
    response: Response,
    kind: Annotated[Kind, Query(description="nccl-tests or gemm (mamf-finder.py).")],
    pool: Annotated[
        str | None,
        Query(min_length=1, max_length=64, description="The pool it ran on (default: the cluster's only pool)."),
    ] = None,
    collective: Annotated[
        Collective | None,
        Query(description="nccl-tests: the collective, for versions whose output does not name it."),
    ] = None,
    note: Annotated[str, Query(max_length=2000, description="File name or free text.")] = "",
    dry_run: Annotated[bool, Query(description="Check and compare only, store nothing (answers 200).")] = False,
) -> AcceptanceTestOut:
    view = record_test(s, cluster_id, kind, body, pool, note, collective, dry_run)
    if dry_run:
        response.status_code = 200
    return acceptance_out(view)


@router.get("/v1/clusters/{cluster_id}/acceptance-tests", response_model=list[AcceptanceTestOut], responses=NOT_FOUND)
def tests(cluster_id: RowId, s: SessionDep, _: Reader) -> list[AcceptanceTestOut]:
    return [acceptance_out(v) for v in list_tests(s, cluster_id)]
