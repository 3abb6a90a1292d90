"""The nightly pass refits a cluster whose acceptance tests are newer than its calibration, as it does for
measured runs [issue 33]."""

from __future__ import annotations

from service.acceptance import record_test
from service.calibration import recalibrate_stale
from store.db import Database
from store.repositories.measurements import CalibrationRepository
from tests.factories import cluster_and_model
from tests.optimizer.calibration.nccl_output import nccl_output

# One node's all_gather_perf at 396 GB/s: 1.1 x NVLink's sourced 360 (an all_reduce there runs NVLS and pins nothing).
NCCL_SINGLE = nccl_output("all_gather", 1, 8, 396.0, latency_us=5.0)


def test_an_acceptance_test_is_new_evidence_for_the_nightly_refit(db: Database) -> None:
    with db.session() as s:
        c, _m = cluster_and_model(s, nodes=1)
        assert recalibrate_stale(s, c.id) == []  # nothing measured: nothing to fit
        record_test(s, c.id, "nccl-tests", NCCL_SINGLE)
        assert recalibrate_stale(s, c.id) == [c.id]
        assert recalibrate_stale(s, c.id) == []  # fitted already: nothing newer
        cal = CalibrationRepository(s).current(c.id)
        assert cal is not None and cal.measurements == 0
        assert cal.constants["pools"][next(iter(cal.constants["pools"]))]["intra_node"] > 1.05
