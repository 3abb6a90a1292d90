"""What the user describes: models, clusters and their GPU catalog, workloads, parallel configurations,
and the loaders that read them. Imports only optimizer.errors."""
