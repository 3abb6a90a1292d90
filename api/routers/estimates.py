"""/v1/estimates: price one parallel configuration (memory, step time or TTFT/TPOT, and serving latency
percentiles at the workload's rate or concurrency), as `meshplan estimate` does. Nothing is stored."""

from __future__ import annotations

from fastapi import APIRouter

from api.deps import Reader, SessionDep
from api.responses import STANDARD, codes
from api.schemas import EstimateRequest
from optimizer.costmodel.result import Estimate
from service.estimates import estimate_config

router = APIRouter(prefix="/v1/estimates", tags=["estimates"], responses=STANDARD)


@router.post("", response_model=Estimate, responses=codes(404, 413))
def post_estimate(body: EstimateRequest, s: SessionDep, _: Reader) -> Estimate:
    return estimate_config(s, body.cluster_id, body.model_id, body.workload, body.config)
