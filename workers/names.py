"""Task names, in one place (the API sends by name; the worker registers by name)."""

RUN_JOB = "meshplan.run_job"
REPLAN = "meshplan.replan"
SWEEP = "meshplan.sweep"
SYNC = "meshplan.sync_inventories"
