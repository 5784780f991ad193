"""Parameter groups as training recipes build them: no weight decay for biases and norms,
per-group learning rates (issue 12, item 3).

Both helpers return a :class:`~spec_lang.optim.ParamGroups` with explicit member lists, so a
spec and a plan that use the same recipe share the groups, and a plan that decays a bias the
spec does not is refuted at that bias (its updated value differs by ``lr * wd * p``).

* :func:`weight_decay_groups`: the PyTorch / nanoGPT recipe (nanoGPT ``configure_optimizers``:
  "all weight tensors in matmuls + embeddings decay, all biases and layernorms don't"): torch
  decides by rank (a tensor with two or more dims decays); here parameters keep named dims, so
  a bias with head dims is found by its ``.bias`` suffix as well.
* :func:`megatron_param_groups`: Megatron-LM's ``_get_param_groups``
  (``megatron/core/optimizer/__init__.py``): weight decay off when
  ``no_weight_decay_cond(name, dims)`` holds (default: the name ends in ``.bias`` or the
  parameter has one dim), learning rate times ``lr_mult`` when ``scale_lr_cond(name, dims)``
  holds (Megatron's ``--decoupled-lr`` / ``lr_mult`` for e.g. the output layer); one group per
  distinct ``(wd_mult, lr_mult)``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from spec_lang.optim import ParamGroups
from spec_lang.tensor import fail, user_site

__all__ = ["weight_decay_groups", "megatron_param_groups"]

Cond = Callable[[str, Sequence[Any]], bool]


def _with(opt: Any, site: str, **kw: Any) -> Any:
    try:
        return dataclasses.replace(opt, **kw)
    except (TypeError, ValueError) as e:
        raise fail(f"{opt!r} has no {', '.join(kw)} to set per group ({e})", site=site) from None


def _is_bias_or_norm(name: str, dims: Sequence[Any]) -> bool:
    """torch's rank rule (biases and norm weights are 1-D there), plus the ``.bias`` suffix: a
    bias stored with its head dims (GPT-2's ``attn.q.bias (NH, HD)``) is still a bias."""
    return len(dims) < 2 or name.endswith(".bias")


def weight_decay_groups(params: Mapping[str, Sequence[Any]], optimizer: Any) -> ParamGroups:
    """Two groups: weights use ``optimizer``; biases and norm weights (fewer than 2 dims, or a
    name ending in ``.bias``) use it with ``weight_decay=0``. ``params``: name -> dims
    (``spec.params`` or ``model.params``).

    Raises:
        SpecError / PlanError: ``optimizer`` has no ``weight_decay`` field.
    """
    site = user_site(2)
    plain = [n for n, dims in params.items() if _is_bias_or_norm(n, dims)]
    decay = [n for n in params if n not in plain]
    groups = [(decay, optimizer)] if decay else []
    if plain:
        groups.append((plain, _with(optimizer, site, weight_decay=0)))
    return _at(ParamGroups(groups), site)


def _megatron_no_wd(name: str, dims: Sequence[Any]) -> bool:
    return name.endswith(".bias") or len(dims) == 1


def megatron_param_groups(params: Mapping[str, Sequence[Any]], optimizer: Any, *,
                          no_weight_decay_cond: Cond | None = None,
                          scale_lr_cond: Cond | None = None, lr_mult: Any = 1) -> ParamGroups:
    """Megatron-LM's parameter groups (module docstring): ``(wd_mult, lr_mult)`` per parameter,
    ``wd_mult = 0`` when ``no_weight_decay_cond(name, dims)`` (default: a ``.bias`` or a 1-D
    parameter), ``lr * lr_mult`` when ``scale_lr_cond(name, dims)`` (default: never).

    Raises:
        SpecError / PlanError: ``optimizer`` has no ``lr`` / ``weight_decay`` field.
    """
    site = user_site(2)
    no_wd = no_weight_decay_cond or _megatron_no_wd
    keyed: dict[tuple[bool, bool], list[str]] = {}
    for name, dims in params.items():
        scaled = bool(scale_lr_cond(name, dims)) if scale_lr_cond is not None else False
        keyed.setdefault((bool(no_wd(name, dims)), scaled), []).append(name)
    groups = []
    for (off, scaled), names in keyed.items():
        kw: dict[str, Any] = {}
        if off:
            kw["weight_decay"] = 0
        if scaled:
            kw["lr"] = optimizer.lr * lr_mult
        groups.append((names, _with(optimizer, site, **kw) if kw else optimizer))
    return _at(ParamGroups(groups), site)


def _at(groups: ParamGroups, site: str) -> ParamGroups:
    object.__setattr__(groups, "site", site)   # errors name the user's line, not this module
    return groups
