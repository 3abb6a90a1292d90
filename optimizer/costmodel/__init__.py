"""Analytical cost model: per-GPU memory and step time of ONE parallel configuration.

Sources are cited in short comments as [KEY]; the keys are listed in docs/costmodel-sources.md.
`[formulas X]` (e.g. [formulas C7]) is short for section X of docs/costmodel-formulas.md, the team's collected
formula sheet. The communication and compute terms of a training step live one per module in `terms/`;
`stage.py` composes them into a pipeline stage's time and memory, `training.py` the stages into a step.
"""
