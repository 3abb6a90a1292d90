"""The accuracy harness: the cost model scored on published runs, serving runs, planner picks on public
scenarios, and synthetic fit checks. Tests and benchmarks import it; the product imports none of it."""
