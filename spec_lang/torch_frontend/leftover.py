"""State a training step leaves for the next one that is not a traced tensor (adversarial round
4, ``tests/adversarial/ATTEMPTS.md``): what :mod:`capture` checks around the user's
``train_step`` besides the graph's outputs.

* ``t.data = v`` is not recorded by ``make_fx`` (``set_data`` is no ATen op): the new value
  would never reach a goal (finding R4-5), so it is refused with the user's line.
* a parameter replaced by another object during the step (``model.w = nn.Parameter(...)``):
  the outputs are read from the parameters the capture installed, so a replacement is refused
  (finding R4-1).
* the optimizer's hyperparameters (``param_groups``: ``lr``, ``betas``, ``weight_decay``, ...)
  and every module's ``training`` flag as the step leaves them are returned as text, compared
  between the single-device step and every traced rank (findings R4-3, R4-4).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

import torch
from torch import nn

from spec_lang.errors import PlanError
from spec_lang.torch_frontend.styles import _user_site

__all__ = ["refuse_data_assignment", "check_parameters_kept", "scalar_state",
           "scalar_state_differences"]


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


def scalar_state(model: nn.Module, opt: torch.optim.Optimizer) -> dict[str, str]:
    """The non-tensor state the step leaves: ``param_groups[i].<key>`` (every hyperparameter,
    not ``params``) and ``<module>.training``, as ``repr`` text."""
    out: dict[str, str] = {}
    for i, g in enumerate(opt.param_groups):
        for k, v in g.items():
            if k == "params":
                continue
            out[f"param_groups[{i}].{k}"] = (f"<tensor {tuple(v.shape)}>"
                                             if isinstance(v, torch.Tensor) else repr(v))
    for name, m in model.named_modules():
        out[f"{name or '<model>'}.training"] = repr(m.training)
    return out


def scalar_state_differences(spec: Mapping[str, str], plan: Mapping[str, str]) -> list[str]:
    """What the parallel step leaves differently, in words (keys both sides have)."""
    return [f"{k} leaves the step as {plan[k]} in the parallel step, {spec[k]} in the "
            "single-device step" for k in spec if k in plan and plan[k] != spec[k]]
