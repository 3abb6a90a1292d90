"""The communication and compute terms of a training step, one module per term, each a few pure functions with
their sources. `optimizer/costmodel/stage.py` composes them into a pipeline stage's time and memory."""
