"""Cluster inventories read from a scheduler: Slurm (`sinfo --json`, `scontrol show nodes --json`, topology.conf)
and Kubernetes (`kubectl get nodes -o json` with GPU Feature Discovery and topology labels). Pure parsers: running
the scheduler's commands belongs to service.scheduler_sync."""
