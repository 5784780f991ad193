"""The Python attributes a parameter carries into the traced step (adversarial round 44b,
R44b-3 / R44b-4).

The capture traces each step on fresh ``nn.Parameter`` objects named as the model's
parameters, so an attribute the user set on a parameter (a mark an optimizer's parameter
groups read: ``p.no_decay = True``) would be lost on both sides, and a step whose real
distributed run drops it (or keeps it) as the single-device run does not was accepted.
What torch 2.13 leaves on the parameter object at each name:

* the single-device model, a DDP-style ``replicate``d one, a parameter no wrapper manages: the
  object ``build_model`` made, with every attribute set on it until the step;
* tensor parallelism (``parallelize_module``, ``distribute_tensor``): the new parameter the
  styles made, with what was set on it afterwards (the capture runs the styles for real);
* ``fully_shard`` and the FSDP-based ``replicate``: a new sharded parameter made at the call
  (``FSDPParam._init_sharded_param`` copies no attribute), so what was set before the call is
  dropped and what was set after is kept. The stand-in does not replace the parameter, so
  :func:`snapshot` records its attributes at the call; an attribute present at the call and
  still present when ``parallelize`` returns cannot be told from one set again after it, and
  is refused (exit 3).
"""

from __future__ import annotations

from typing import Any

from spec_lang.errors import PlanError

__all__ = ["snapshot", "carried"]


def snapshot(module: Any) -> dict[int, dict[str, Any]]:
    """id(parameter) -> a copy of its instance attributes, for every parameter under
    ``module`` at a ``fully_shard`` / FSDP-based ``replicate`` call."""
    return {id(p): dict(vars(p)) for p in module.parameters()}


_PLAIN = (type(None), bool, int, float, complex, str, bytes)


def _plain(v: Any, depth: int = 0) -> bool:
    """``v`` is a number, a string, None, or a tuple / list / set / dict of them (what a mark
    holds): nothing that can reach a tensor (round 44d, R44d-4: a tensor inside a
    ``SimpleNamespace`` or behind a ``weakref`` got past a search for tensors)."""
    if type(v) in _PLAIN:
        return True
    if depth > 8:
        return False
    if type(v) in (tuple, list, set, frozenset):
        return all(_plain(x, depth + 1) for x in v)
    if type(v) is dict:
        return all(_plain(k, depth + 1) and _plain(x, depth + 1) for k, x in v.items())
    return False


def carried(name: str, p0: Any, fresh: Any, unit: Any | None, site: str) -> dict[str, Any]:
    """The attributes to set on ``fresh`` (the traced parameter at ``name``) from ``p0`` (the
    object the model holds there when the step starts), for ``unit`` (the data-parallel unit
    managing it, or None): every instance attribute ``fresh`` does not have itself (a
    ``DTensor``'s own fields stay its own), less those an FSDP2 state dropped at its call.

    Raises:
        PlanError: an attribute holding anything but numbers, strings and containers of them
            (R44c-4, R44d-4: another parameter, which the traced step does not hold), or one
            set before the ``fully_shard`` call and still present
            after ``parallelize`` (module docstring), naming the parameter and the call's
            line.
    """
    own = set(vars(fresh))
    out = {k: v for k, v in vars(p0).items() if k not in own}
    held = sorted(k for k, v in out.items() if not _plain(v))
    if held:    # the traced step runs on fresh parameters: a held object is not one (R44c-4)
        raise PlanError(f"{site}: the parameter {name!r} holds a "
                        f"{type(out[held[0]]).__name__} in its attribute {held[0]!r}: prove "
                        "--torch traces the step on fresh parameters, so a tensor it refers to "
                        "(another parameter, a buffer) is not the model's; keep such marks to "
                        "numbers, strings and tuples of them, and look tensors up by name in "
                        "train_step (R44c-4, R44d-4)")
    if unit is None or not getattr(unit, "fsdp_state", False):
        return out
    at_wrap = getattr(unit, "settings", {}).get("_attrs_at_wrap", {}).get(id(p0), {})
    both = sorted(k for k in out if k in at_wrap)
    if both:
        raise PlanError(f"{site}: the parameter {name!r} carries the attribute {both[0]!r} "
                        "from before this fully_shard / replicate call: FSDP2's sharded "
                        "parameter does not carry it (torch 2.13 makes a new parameter), which "
                        "the single-device model's does; set such marks after parallelize, or "
                        "group the optimizer's parameters by name (R44b-4)")
    return out
