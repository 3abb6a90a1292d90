"""Pins checked before a search: pins that contradict each other, the model or the framework, or leave a knob no
value in the search space, each an error naming the pin and the rule it meets."""

from __future__ import annotations

from optimizer.errors import DomainError
from optimizer.frameworks.capabilities import Framework, allows, check_model, check_workload
from optimizer.search.candidates import TrainingSpace
from optimizer.search.space import SearchSpace
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.recompute_modules import module_rule
from optimizer.spec.workload import TrainingWorkload


def check_pins(ts: TrainingSpace) -> None:
    """Pins that contradict each other, the model or the framework (`check_pin_rules`), or leave a knob no value
    in the search space: an error naming both."""
    sp = ts.space
    check_pin_rules(ts.fw, ts.model, ts.w, sp)
    for knob, values in (
        ("tp", ts.tp_values()),
        ("cp", ts.cp_values()),
        ("ep", ts.ep_values()),
        ("mbs", ts.mbs_values()),
    ):
        if not values:
            pin = sp.pins.get(knob)
            m = ts.model
            why = {
                "tp": heads_rule(m),
                "cp": f"seq_len={ts.w.seq_len} (the sequence splits into 2 x cp chunks: seq_len % (2 x cp) == 0)",
                "ep": f"num_experts={m.moe.num_experts if m.moe else 0} ({m.name} is dense)" if knob == "ep" else "",
                "mbs": f"global_batch_size={ts.w.global_batch_size}",
            }[knob]
            raise DomainError(f"pin.{knob}", f"{pin_text(knob, pin)} contradicts {why}")
    if ts.budget < 1:
        raise DomainError("max_gpus", "no GPU available in the allowed pools")


def check_pin_rules(fw: Framework, model: ModelSpec, w: TrainingWorkload, sp: SearchSpace) -> None:
    """Pins that contradict each other, the model or the framework, and what the framework cannot run of the model
    and the workload: an error naming both."""
    check_model(fw, model)
    check_workload(fw, w)
    for knob, knob_pin in sp.pins.items():
        pinned = knob_pin.values or ()
        if pinned and not any(allows(fw, knob, v) for v in pinned):
            shown = ",".join(_pin_value(v) for v in pinned)
            raise DomainError(f"pin.{knob}", f"{knob}={shown} is not available in {fw.name} ({fw.source(knob)})")
    module_sets = sp.pinned_values("recompute_modules")
    if module_sets is not None:  # Megatron's rules for its module list, named at the pin
        if not sp.allows("recompute", "selective"):
            raise DomainError("pin.recompute_modules", "needs recompute=selective, which the recompute pin excludes")
        for mods in module_sets:
            for module in mods:
                rule = module_rule(module, model)
                if rule is not None:
                    raise DomainError("pin.recompute_modules", f"{model.name}: {rule}")
    if model.moe is None:  # expert knobs on a dense model: say so, not 'nothing fits'
        overlap, etp = sp.pins.get("ep_comm_overlap"), sp.pins.get("etp")
        if overlap is not None and overlap.values and all(overlap.values):
            raise DomainError("pin.ep_comm_overlap", f"needs ep > 1: {model.name} is dense (no experts)")
        if etp is not None:
            raise DomainError("pin.etp", f"sets the experts' tensor parallelism: {model.name} is dense")


def heads_rule(m: ModelSpec) -> str:
    """What a tp degree must divide (the rule in TrainingSpace.tp_values)."""
    return f"num_attention_heads={m.num_attention_heads} and num_kv_heads={m.kv_heads}"


def _pin_value(v: object) -> str:
    """A pinned value as it was written: true/false, a module set as a+b."""
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, tuple):
        return "+".join(str(x) for x in v)
    return str(v)


def pin_text(knob: str, pin: object) -> str:
    if pin is None:
        return knob
    values = getattr(pin, "values", None)
    if values:
        return f"{knob}={','.join(_pin_value(v) for v in values)}"
    low, high = getattr(pin, "low", None), getattr(pin, "high", None)
    return " and ".join(x for x in (f"{knob}>={low}" if low else "", f"{knob}<={high}" if high else "") if x) or knob
