"""Prometheus metrics: requests (counted here), jobs by state and solve times (read from the database at scrape
time, so every process's jobs are counted, whichever worker ran them)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import case, func, select

from store.db import Database
from store.models import JOB_STATES, Job

SOLVE_BUCKETS = (0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0, 600.0)


class JobCollector(Collector):
    def __init__(self, db: Database) -> None:
        self.db = db

    def collect(self) -> Iterator[GaugeMetricFamily | HistogramMetricFamily]:
        with self.db.session() as s:
            counts = dict(s.execute(select(Job.status, func.count()).group_by(Job.status)).all())
            cols = [func.sum(case((Job.elapsed_s <= b, 1), else_=0)) for b in SOLVE_BUCKETS]
            row = s.execute(
                select(func.count(), func.coalesce(func.sum(Job.elapsed_s), 0.0), *cols).where(
                    Job.status == "succeeded", Job.elapsed_s.is_not(None)
                )
            ).one()
        g = GaugeMetricFamily("meshplan_jobs", "Planning jobs by state.", labels=["state"])
        for state in JOB_STATES:
            g.add_metric([state], float(counts.get(state, 0)))
        yield g
        total, total_sum = int(row[0]), float(row[1])
        buckets = [(str(b), float(row[2 + i] or 0)) for i, b in enumerate(SOLVE_BUCKETS)] + [("+Inf", float(total))]
        yield HistogramMetricFamily(
            "meshplan_solve_time_seconds", "Solver time of succeeded jobs.", buckets=buckets, sum_value=total_sum
        )


class Metrics:
    def __init__(self, db: Database) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "meshplan_http_requests", "HTTP requests.", ["method", "route", "status"], registry=self.registry
        )
        self.latency = Histogram(
            "meshplan_http_request_seconds", "HTTP request latency.", ["route"], registry=self.registry
        )
        self.registry.register(JobCollector(db))
