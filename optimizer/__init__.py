"""meshplan's pure domain: specs, GPU catalog, frameworks, cost model, the CP-SAT search, explanations, exports.

This package imports no database or web code; `store`, `api` and `workers` import it, never the reverse.
"""
