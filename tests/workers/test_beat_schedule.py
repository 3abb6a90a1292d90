"""What beat runs: the nightly re-plan (which syncs the schedulers first) and, when asked, syncs in between."""

from __future__ import annotations

from store.settings import Settings
from workers import names
from workers.celery_app import beat_schedule


def test_inventory_syncs_are_scheduled_only_when_an_interval_is_set() -> None:
    assert set(beat_schedule(Settings(), 2, 0)) == {"nightly-replan", "sweep-lost-jobs"}
    every = beat_schedule(Settings(sync_interval_s=300), 2, 0)["sync-inventories"]
    assert every == {"task": names.SYNC, "schedule": 300.0}
