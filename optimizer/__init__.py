"""meshplan's pure domain: specs, GPU catalog, cost model and (later) the CP-SAT search.

This package imports no database or web code; `store`, `api` and `workers` import it, never the reverse.
"""
