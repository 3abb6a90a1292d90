"""Acceptance tests in [issue 33 §1]: a cluster team's nccl-tests and GEMM sweep outputs, recorded per pool as
their tools printed them, compared with the cost model's sourced figures, and turned into the priors the cluster's
calibration starts from (optimizer/calibration/acceptance.py).

A test is parsed and checked against its pool before anything is stored: the pool must be one of the cluster's
(by default its only pool), the GPU the output names must be the pool's, the run must fit the pool's nodes and
reach the bus bandwidth's plateau, its figures must be positive. Per pool, kind, subject (collective or dtype) and
scope (one node or several), the newest test is the one the priors come from.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from optimizer.calibration.acceptance import KINDS, AcceptanceFigure, Evaluation, PoolRun, TestRun, evaluate, figures_of
from optimizer.calibration.gemm_bench import GemmBenchRun, parse_gemm_bench
from optimizer.calibration.nccl_tests import Collective, NcclTestRun, parse_nccl_tests
from optimizer.errors import DomainError
from optimizer.spec.calibration import Priors
from optimizer.spec.cluster_spec import ClusterSpec
from store.models import AcceptanceTest
from store.repositories.acceptance import AcceptanceTestRepository
from store.repositories.clusters import ClusterRepository, revision_spec


@dataclass(frozen=True)
class AcceptanceView:
    """A recorded test (or a checked one, not stored: `row` None) with its figures against the current inventory."""

    row: AcceptanceTest | None
    cluster_id: int
    pool: str
    kind: str
    subject: str
    note: str
    run: TestRun
    figures: list[AcceptanceFigure]
    sets_priors: bool  # the newest of its pool, kind, subject and scope
    error: str  # why it cannot be read against the current inventory ('' when it can)

    @property
    def id(self) -> int | None:
        return self.row.id if self.row is not None else None

    @property
    def created_at(self) -> datetime | None:
        return self.row.created_at if self.row is not None else None


def parse_test(kind: str, text: str, collective: Collective | None = None) -> TestRun:
    """The run in `text`, read as `kind` prints it (a DomainError naming the line when it cannot be)."""
    if kind == "gemm":
        if collective is not None:
            raise DomainError("collective", "a GEMM sweep has no collective (give it for nccl-tests only)")
        return parse_gemm_bench(text)
    if kind == "nccl-tests":
        return parse_nccl_tests(text, collective)
    raise DomainError("kind", f"must be one of {', '.join(KINDS)} (got {kind!r})")


def _spec(s: Session, cluster_id: int) -> ClusterSpec:
    repo = ClusterRepository(s)
    cluster = repo.get(cluster_id)
    head = repo.head(cluster)
    if head is None:
        raise DomainError("cluster", f"cluster {cluster_id} has no inventory")
    return revision_spec(cluster, head)


def _pool_name(spec: ClusterSpec, pool: str | None) -> str:
    names = [p.name for p in spec.pools]
    if pool is None:
        if len(names) == 1:
            return names[0]
        raise DomainError("pool", f"cluster {spec.name!r} has pools {', '.join(names)}: say which one the test ran on")
    if pool not in names:
        raise DomainError("pool", f"no pool {pool!r} in cluster {spec.name!r}; pools: {', '.join(names)}")
    return pool


def run_of(row: AcceptanceTest) -> TestRun:
    """The parsed run a row stores."""
    if row.kind == "gemm":
        return GemmBenchRun.model_validate(row.figures)
    return NcclTestRun.model_validate(row.figures)


def _views(s: Session, cluster_id: int, spec: ClusterSpec, extra: PoolRun | None = None) -> list[AcceptanceView]:
    rows = AcceptanceTestRepository(s).of_cluster(cluster_id)
    tests = [PoolRun(r.pool, run_of(r)) for r in rows]
    given: list[tuple[AcceptanceTest | None, PoolRun, str]] = [(r, t, r.note) for r, t in zip(rows, tests, strict=True)]
    if extra is not None:  # a test being checked: the newest
        given.insert(0, (None, extra, ""))
    ev = evaluate([t for _, t, _ in given], spec)
    return [
        AcceptanceView(
            row=row,
            cluster_id=cluster_id,
            pool=t.pool,
            kind=t.kind,
            subject=t.subject,
            note=note,
            run=t.run,
            figures=ev.figures[i],
            sets_priors=ev.newest[i],
            error=ev.errors[i],
        )
        for i, (row, t, note) in enumerate(given)
    ]


def record_test(
    s: Session,
    cluster_id: int,
    kind: str,
    text: str,
    pool: str | None = None,
    note: str = "",
    collective: Collective | None = None,
    dry_run: bool = False,
) -> AcceptanceView:
    """Parse, check and (unless `dry_run`) store one test of a pool of the cluster; its figures against the cost
    model's come back. Nothing is stored when any check fails."""
    spec = _spec(s, cluster_id)
    name = _pool_name(spec, pool)
    run = parse_test(kind, text, collective)
    test = PoolRun(name, run)
    figures_of(test, spec)  # the checks against the pool, raising
    if dry_run:
        return _views(s, cluster_id, spec, extra=test)[0]
    row = AcceptanceTestRepository(s).add(
        AcceptanceTest(
            cluster_id=cluster_id,
            pool=name,
            kind=test.kind,
            subject=test.subject,
            figures=run.model_dump(mode="json"),
            raw=text,
            note=note,
        )
    )
    return next(v for v in _views(s, cluster_id, spec) if v.row is row)


def list_tests(s: Session, cluster_id: int) -> list[AcceptanceView]:
    """The cluster's tests, newest first, with their figures against the current inventory."""
    return _views(s, cluster_id, _spec(s, cluster_id))


def cluster_acceptance(s: Session, cluster_id: int) -> Evaluation:
    """The cluster's tests evaluated: figures, the measured-vs-sourced table per pool, the priors."""
    rows = AcceptanceTestRepository(s).of_cluster(cluster_id)
    return evaluate([PoolRun(r.pool, run_of(r)) for r in rows], _spec(s, cluster_id))


def acceptance_priors(s: Session, cluster_id: int) -> Priors:
    """Pool -> constant -> prior, from the cluster's newest tests ({} when it has none)."""
    if not AcceptanceTestRepository(s).of_cluster(cluster_id, limit=1):
        return {}
    return cluster_acceptance(s, cluster_id).priors
