"""State a training step leaves for the next one that is not a traced tensor (adversarial round
4, ``tests/adversarial/ATTEMPTS.md``): what :mod:`capture` checks around the user's
``train_step`` besides the graph's outputs.

* ``t.data = v`` is not recorded by ``make_fx`` (``set_data`` is no ATen op): the new value
  would never reach a goal (finding R4-5), so it is refused with the user's line.
* a parameter replaced by another object during the step (``model.w = nn.Parameter(...)``):
  the outputs are read from the parameters the capture installed, so a replacement is refused
  (finding R4-1).
* the optimizer's hyperparameters (``param_groups``: ``lr``, ``betas``, ``weight_decay``, ...,
  and its ``params`` as names), every module's ``training`` flag and public scalar attributes
  and each parameter's ``requires_grad`` as the step leaves them are returned as typed text,
  compared between the single-device step and every traced rank (findings R4-3, R4-4, R6-1,
  R6-3, R6-4); a hook the step leaves on a parameter or a module is refused (R6-2).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

import torch
from torch import nn

from spec_lang.errors import PlanError
from spec_lang.torch_frontend.grad_snapshot import GRADS_READ_AT
from spec_lang.torch_frontend.param_hooks import accumulator_hooks
from spec_lang.torch_frontend.step_state import TORCH_MODULE, UNCOMPARABLE, UNREADABLE
from spec_lang.torch_frontend.styles import _user_site
from spec_lang.torch_frontend.value_text import _qual, _type_module
from spec_lang.torch_frontend.wrapper_names import is_checkpoint_wrapper, state_dict_name

__all__ = ["refuse_data_assignment", "check_parameters_kept", "scalar_state",
           "scalar_state_differences", "hook_counts", "check_no_new_hooks", "CHANGED",
           "zeros_for_one_sided_grad_left"]


@contextlib.contextmanager
def refuse_data_assignment(path: str) -> Iterator[None]:
    """Within the block, ``tensor.data = value`` raises :class:`PlanError` naming the line.

    Raises:
        PlanError: on the first ``.data`` assignment (finding R4-5).
    """
    base = torch._C.TensorBase.data  # noqa: SLF001 -- the C descriptor torch.Tensor inherits

    def get(self: torch.Tensor) -> torch.Tensor:
        return base.__get__(self)

    def put(self: torch.Tensor, value: Any) -> None:  # noqa: ARG001
        raise PlanError(f"{_user_site(path)}: `.data = ...` in the training step is not traced "
                        "(make_fx records no set_data), so its value would never be compared; "
                        "write `with torch.no_grad(): t.copy_(value)` instead (docs/torch.md)")

    torch.Tensor.data = property(get, put)
    try:
        yield
    finally:
        del torch.Tensor.data


def check_parameters_kept(model: nn.Module, installed: Mapping[str, nn.Parameter],
                          tied: Mapping[str, tuple[str, ...]], path: str) -> None:
    """Every parameter name still holds the object the capture installed.

    Raises:
        PlanError: naming the first parameter the step replaced (finding R4-1).
    """
    for n, p in installed.items():
        for name in (n, *tied.get(n, ())):
            try:
                cur = model.get_parameter(name)
            except AttributeError:
                cur = None
            if cur is not p:
                raise PlanError(f"{path}:1: train_step replaced parameter {name!r} (assigned a new "
                                "object); prove --torch compares the parameters it installed: "
                                "update them in place (`with torch.no_grad(): p.copy_(...)`)")


def _text(v: Any) -> str:
    """A setting as text that cannot lie: the type and the value (``float.__repr__`` of a float
    subclass, finding R6-3; a ``numpy`` scalar's value, R7-2); a tensor, or a value of any
    other type, is ``<tensor>`` / ``<type ...>`` (its value is not compared: UNKNOWN)."""
    if isinstance(v, torch.Tensor):
        return "<tensor>"
    for base in (bool, int, float, str):
        if isinstance(v, base):
            t = "" if type(v) is base else f"{type(v).__name__}:"
            return t + base.__repr__(v)
    if _type_module(type(v)) == "numpy" and getattr(v, "ndim", None) == 0 and hasattr(v, "item"):
        return f"numpy.{type(v).__name__}:{v.item()!r}"
    if isinstance(v, (tuple, list)):
        return "(" + ", ".join(_text(x) for x in v) + ")"
    return "None" if v is None else f"<type {_qual(type(v))}>"


def scalar_state(model: nn.Module, opt: torch.optim.Optimizer) -> dict[str, str]:
    """The non-tensor state the step leaves, as text: ``param_groups[i].<key>`` (every
    hyperparameter, and ``params`` as parameter names: finding R6-4), ``<module>.training``,
    every public scalar attribute of a module (``<module>.<attr>``: R6-1), and each parameter's
    ``requires_grad`` (R6-1)."""
    names = {id(p): n for n, p in model.named_parameters(remove_duplicate=False)}
    out: dict[str, str] = {}
    for i, g in enumerate(opt.param_groups):
        for k, v in g.items():
            out[f"param_groups[{i}].{k}"] = (
                "[" + ", ".join(names.get(id(p), "<other>") for p in v) + "]" if k == "params"
                else _text(v))
    out["param_groups"] = str(len(opt.param_groups))
    for name, m in model.named_modules():
        where = name or "<model>"
        if name and not state_dict_name(name + "."):
            # the block of torch's wrapper at the root: the single-device model itself (named
            # ``<model>`` once the wrapper's segment is removed: R40b-1)
            where = f"<model>.{name}"
        if not is_checkpoint_wrapper(m):
            # torch's wrapper: its block's flag is the one its forward runs with (the
            # wrapper made in training mode around a block in eval mode: R39a-5); a step
            # changing the wrapper's own flag is reported by step_state
            out[f"{where}.training"] = repr(m.training)
        for k, v in vars(m).items():
            if not k.startswith("_") and k != "training" and isinstance(v, (bool, int, float, str)):
                out[f"{where}.{k}"] = _text(v)
    for n, p in model.named_parameters():
        out[f"{n}.requires_grad"] = repr(p.requires_grad)
    return out


def hook_counts(model: nn.Module, params: Mapping[str, Any]) -> dict[str, int]:
    """How many hooks each parameter, its ``AccumulateGrad`` node and each module holds (a hook
    registered during the step would act on the next one: findings R6-2, R6-8)."""
    out = {}
    for n, p in params.items():
        out[f"parameter {n!r}"] = len(getattr(p, "_backward_hooks", None) or {}) + \
            len(getattr(p, "_post_accumulate_grad_hooks", None) or {})
        out[f"the gradient accumulator of parameter {n!r}"] = accumulator_hooks(p)  # R6-8
    for name, m in model.named_modules():
        out[f"module {name or '<model>'!r}"] = sum(
            len(getattr(m, k, None) or {}) for k in (
                "_forward_hooks", "_forward_pre_hooks", "_backward_hooks",
                "_backward_pre_hooks", "_state_dict_hooks", "_load_state_dict_pre_hooks"))
    return out


def check_no_new_hooks(before: Mapping[str, int], after: Mapping[str, int], path: str) -> None:
    """Raises:
        PlanError: naming the first parameter or module that gained a hook during the step.
    """
    for k, v in after.items():
        if v > before.get(k, 0):
            raise PlanError(f"{path}:1: train_step leaves a new hook on {k}; it would act on "
                            "the next step, which prove --torch does not trace: remove it "
                            "before train_step returns (docs/torch.md)")


# prefix of the entries :mod:`step_state` found changed by the step (in ``Trace.after``)
CHANGED = "changed: "


def scalar_state_differences(spec: Mapping[str, str], plan: Mapping[str, str]) -> list[str]:
    """What the parallel step leaves differently, in words: a setting both sides have with two
    values; a setting whose value is a tensor or of a type not compared (R6-3, R7-2); Python
    state (:mod:`step_state`) one step changes and the other does not, or both change to
    different values or to a value that cannot be compared (R7-1, R7-3), or both change alike
    (a later step that reads it may run another program: R10-4; not the random generators);
    a torch module both processes have loaded, as the two steps leave it (R9-2)."""
    out = [f"{k} leaves the step as {plan[k]} in the parallel step, {spec[k]} in the "
           "single-device step" for k in spec if k in plan and plan[k] != spec[k]
           and not k.startswith(CHANGED) and k != GRADS_READ_AT]   # frontend's (R41e-3)
    out += [f"{k} is a {v[1:-1]}: its value leaving the step is not compared"
            for k, v in plan.items() if v == "<tensor>" or v.startswith("<type ")]
    for k in sorted({k for k in (*spec, *plan) if k.startswith(CHANGED)}):
        what, s, p = k[len(CHANGED):], spec.get(k), plan.get(k)
        if what.startswith(TORCH_MODULE) and what in spec and what in plan:
            if (s or p or "").startswith(UNCOMPARABLE):   # holding a user function (R11-7)
                out.append(f"the step changes {what} to hold a function of your code, which "
                           "prove --torch cannot compare: keep torch's modules unpatched in "
                           "train_step")
            continue     # compared as both steps leave it, above (torch initialises lazily,
            #              in the step on one side and before it on the other: R9-2)
        if s is None or p is None:
            side = "parallel" if s is None else "single-device"
            out.append(f"the {side} step changes {what} (to {_short(p or s)}) and the other "
                       "does not: the next step would differ")
        elif s != p:
            out.append(f"{what} leaves the step as {_short(p)} in the parallel step, "
                       f"{_short(s)} in the single-device step")
        elif s.startswith(UNREADABLE):
            out.append(f"prove --torch cannot read {what} ({_short(s[1:])}), so it cannot tell "
                       "whether the step changes it: keep such state out of the train file's "
                       "globals and the modules")
        elif s.startswith(UNCOMPARABLE):
            out.append(f"the step changes {what} to a value prove --torch cannot compare "
                       f"({_short(s)}): keep such state out of train_step")
        elif not what.startswith(TORCH_MODULE) and what not in _ADVANCES_ALIKE:
            out.append(f"both steps change {what} (to {_short(s)}): prove --torch traces one "
                       "step, and a later step that reads it may run another program (a step "
                       "counter that steers the plan: R10-4); keep such state out of "
                       "train_step")
    return out


# state every step advances without changing the program a later step runs: the random
# generators' draws (their values are the step's inputs, not its code; the seed is not exempt:
# R11-2). An LR scheduler stepped inside train_step is not exempt either: code can branch on
# its counter as on any other (false refusal F11-3, kept: step it after train_step returns,
# as torchtitan's train loop does)
_ADVANCES_ALIKE = frozenset({"torch CPU generator", "numpy's global random generator"})


def _short(v: str) -> str:
    v = v[len(UNCOMPARABLE):] if v.startswith(UNCOMPARABLE) else v
    return v if len(v) <= 60 else v[:57] + "..."


def zeros_for_one_sided_grad_left(spec_out: Mapping[str, Any], plan_out: Mapping[str, Any],
                                  path: str, state_changed: bool = False
                                  ) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """A gradient one step leaves set after it (``grad_left:<p>``) and the other leaves
    ``None``: the ``None`` side is the zero tensor for the next step (finding R6-9: the next
    backward writes ``g`` into ``None`` and adds ``g`` to zeros alike), so the goal compares
    the left gradient with zeros -- provided both steps give ``<p>`` a gradient, as the next
    step then will; a nonzero left gradient (a missing ``zero_grad``, finding R4-2) is then a
    divergence at ``grad_left:<p>``. ``spec_out`` / ``plan_out``: output name -> (role, value,
    node) of :class:`spec_lang.torch_frontend.lower.Lowered`; returned completed, with the
    notes for the verdict's assumptions.

    ``state_changed``: some step changes Python state (:mod:`step_state`), which may change
    the next step's program so that it gives ``<p>`` no gradient (adversarial finding R9-4):
    the rule does not apply.

    Raises:
        PlanError: the parameter has no (lowered) gradient on some side, or the steps change
            Python state (zeros and ``None`` then may differ: the optimizer skips a parameter
            whose gradient is ``None``, momentum included).
    """
    from fractions import Fraction  # noqa: PLC0415

    from spec_lang.torch_frontend.capture import OutputRole  # noqa: PLC0415
    from spec_lang.torch_frontend.values import TV, const  # noqa: PLC0415

    spec_out, plan_out, notes = dict(spec_out), dict(plan_out), []
    left = {n for n in (*spec_out, *plan_out) if n.startswith("grad_left:")}
    for name in sorted(n for n in left if (n in spec_out) != (n in plan_out)):
        p = name.split(":", 1)[1]
        side = "parallel" if name in plan_out else "single-device"
        if state_changed or not (isinstance(spec_out.get(f"grad:{p}", (0, 0, 0))[1], TV)
                                 and isinstance(plan_out.get(f"grad:{p}", (0, 0, 0))[1], TV)):
            raise PlanError(f"{path}:1: the {side} step leaves the gradient of {p!r} set after "
                            "the step and the other does not (a missing or extra zero_grad): "
                            "the next step would accumulate into it")
        missing = spec_out if side == "parallel" else plan_out
        role, v, node = missing[f"grad:{p}"]
        missing[name] = (OutputRole("state", name, role.placements, p),
                         TV(const(Fraction(0)), v.dims), node)
        notes.append(f"the {side} step leaves the gradient of {p} set (zeros expected) and the "
                     "other leaves None: the same state for the next backward, which gives "
                     f"{p} a gradient as this one does (finding R6-9)")
    return spec_out, plan_out, notes
