"""The planner: the best configuration under the cost model, found with CP-SAT, proven, explained, exported.

Search is separate from evaluation (as in Calculon): `space` declares what may vary, `candidates` enumerates and
bounds the global knobs, `stage_model` is the CP-SAT model of one candidate's stage layout, `planner` runs
branch and bound over candidates (`training_search.TrainingSearch`) and dispatches serving to `inference_planner`,
`explain` says why a plan wins, `diagnosis` why nothing fits, `oracle` is the exhaustive reference used by the tests.
"""
