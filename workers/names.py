"""Task names, in one place (the API sends by name; the worker registers by name)."""

RUN_JOB = "meshplan.run_job"
REPLAN = "meshplan.replan"
SWEEP = "meshplan.sweep"
SYNC = "meshplan.sync_inventories"

# Queues: a job taken over from a dead worker goes ahead of new work (workers consume TAKEOVER first, then the
# default queue: kombu's Redis transport with queue_order_strategy="priority") [issue 47 item 2].
TAKEOVER_QUEUE = "meshplan.takeover"
DEFAULT_QUEUE = "celery"
QUEUES = (TAKEOVER_QUEUE, DEFAULT_QUEUE)
