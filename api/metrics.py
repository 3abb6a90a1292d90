"""Prometheus metrics: requests (counted here), jobs by state and solve times (read from the database at scrape
time, so every process's jobs are counted, whichever worker ran them)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from store.db import Database
from store.models import JOB_STATES
from store.repositories.jobs import JobRepository

SOLVE_BUCKETS = (0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0, 600.0)


class JobCollector(Collector):
    def __init__(self, db: Database) -> None:
        self.db = db

    def collect(self) -> Iterator[GaugeMetricFamily | HistogramMetricFamily]:
        with self.db.session() as s:
            jobs = JobRepository(s)
            counts = jobs.counts_by_status()
            total, total_sum, cumulative = jobs.solve_time_histogram(SOLVE_BUCKETS)
        g = GaugeMetricFamily("meshplan_jobs", "Planning jobs by state.", labels=["state"])
        for state in JOB_STATES:
            g.add_metric([state], float(counts.get(state, 0)))
        yield g
        buckets = [(str(b), float(c)) for b, c in zip(SOLVE_BUCKETS, cumulative, strict=True)] + [
            ("+Inf", float(total))
        ]
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
