"""The cost model's price of the phases a trace measures (calibration/trace_measurement.py), from an estimate's
step breakdown (costmodel/result.py StepBreakdown: exposed times, adding up to the step) [issue 54 §2]:
- compute: forward + backward + recompute + optimizer (the kernels of the step's compute and its optimizer step);
- exposed_comm: the exposed tensor, context, expert, pipeline and data-parallel communication and the ZeRO gathers;
- idle: the pipeline bubble and the kernel-launch gaps (costmodel/training.py: what the step has beyond the rest).
Offload copies are priced apart (the trace counts them as memory copies, overlapped or not) and left out. A trace
prices communication by collective kind; the model by parallel dimension: without the process groups' ranks the
two are compared in total only.
"""

from __future__ import annotations

from optimizer.costmodel.result import StepBreakdown


def priced_phases(bd: StepBreakdown) -> dict[str, float]:
    """The estimate's compute, exposed communication and idle time of one step, seconds."""
    return {
        "compute": bd.forward + bd.backward + bd.recompute + bd.optimizer,
        "exposed_comm": bd.tp_comm + bd.cp_comm + bd.ep_comm + bd.pp_comm + bd.dp_comm + bd.zero_gather,
        "idle": bd.bubble + bd.launch,
    }
