"""torch 2.13's ``contract`` bookkeeping for the stand-ins of ``fully_shard`` and ``replicate``
(``torch/distributed/_composable/contract.py``): every composable API records, in each root
module's ``__dict__``, its function -> its state (``STATE_KEY``, read by ``fully_shard.state(m)``)
and its name -> a ``RegistryItem`` (``REGISTRY_KEY``, read by ``contract._get_registry(m)``), and
refuses a second application of one name to a module.

Round 47a: the stand-ins wrote neither, so code testing ``_get_registry(model)`` or
``fully_shard.state(model)`` took the serial spec's path in the capture (R47a-3: a plan doubling
its gradients when the registry names ``fully_shard`` was EQUIVALENT), and both ``replicate``
functions (the DDP-based one and ``replicate_with_fsdp``'s, both named ``replicate``) could be
applied to one module (R47a-2). The state the stand-in records is an instance of torch's own
state class (so ``isinstance`` and ``is None`` answer as for real) whose every non-dunder
attribute read is refused: FSDP2's real state (its parameter groups, its hooks) is not modelled.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import nn

from spec_lang.errors import PlanError

__all__ = ["apply_contract", "registry_of", "mark_managed"]

_STATE_CLASSES: dict[type, type] = {}


def _stand_in_state(state_cls: type, api: str, site: str) -> Any:
    """An instance of a subclass of ``state_cls`` made without running its ``__init__``, whose
    non-dunder attributes raise :class:`PlanError` naming ``site``."""
    cls = _STATE_CLASSES.get(state_cls)
    if cls is None:
        def __getattribute__(self: Any, k: str) -> Any:  # noqa: N807
            if (k.startswith("__") and k.endswith("__")) or k in ("_site_", "_api_"):
                return object.__getattribute__(self, k)
            d = object.__getattribute__(self, "__dict__")
            raise PlanError(f"{d['_site_']}: {d['_api_']}.state(module).{k}: the state of "
                            "torch's composable API is not modelled (round 47a, R47a-3)")

        cls = type(f"StandIn{state_cls.__name__}", (state_cls,),
                   {"__getattribute__": __getattribute__})
        _STATE_CLASSES[state_cls] = cls
    state = object.__new__(cls)
    vars(state).update({"_site_": site, "_api_": api})
    return state


def registry_of(m: nn.Module) -> dict:
    """``m``'s composable-API registry (name -> item), empty when none was applied."""
    from torch.distributed._composable.contract import REGISTRY_KEY  # noqa: PLC0415

    return m.__dict__.get(REGISTRY_KEY) or {}


def apply_contract(modules: Sequence[nn.Module], api: Any, state_cls: type, site: str) -> None:
    """What torch 2.13's ``contract`` wrapper of ``api`` (the original ``fully_shard`` or a
    ``replicate``) does to ``modules`` (the root modules of the call) before ``api`` runs: one
    state shared by the modules, one registry item, both recorded in each module's
    ``__dict__``.

    Raises:
        PlanError: ``api`` (or an API of the same name) already applied to one of the
            modules: torch raises AssertionError on every rank (R46f-3, R47a-2)."""
    from collections import OrderedDict  # noqa: PLC0415

    from torch.distributed._composable.contract import (  # noqa: PLC0415
        REGISTRY_KEY, STATE_KEY, RegistryItem)

    func = getattr(api, "__wrapped__", api)
    name = func.__name__
    state, item = _stand_in_state(state_cls, name, site), RegistryItem()
    for m in modules:
        all_state = m.__dict__.setdefault(STATE_KEY, OrderedDict())
        registry = m.__dict__.setdefault(REGISTRY_KEY, OrderedDict())
        if func in all_state or name in registry:
            raise PlanError(f"{site}: {name}() on a module it (or an API of that name) was "
                            "already applied to: torch 2.13 raises here on every rank "
                            "(R46f-3, R47a-2)")
        all_state.setdefault(func, state)
        registry.setdefault(name, item)


def mark_managed(roots: Sequence[nn.Module]) -> None:
    """What torch 2.13's ``fully_shard`` sets "for Dynamo" on every module it manages
    (``_fsdp_init._get_managed_modules``: the roots' subtrees, not entering a module another
    ``fully_shard`` manages or one ``replicate`` was applied to): ``_is_fsdp_managed_module``
    and ``_fsdp_use_orig_params`` True (round 47c, R47c-2: code testing them took the serial
    spec's path in the capture)."""
    seen: set[int] = set()
    root_ids = {id(r) for r in roots}

    def dfs(m: nn.Module) -> None:
        reg = registry_of(m)
        if "replicate" in reg or (id(m) not in root_ids and "fully_shard" in reg):
            return
        seen.add(id(m))
        for c in m.children():
            if id(c) not in seen:
                dfs(c)
        m._is_fsdp_managed_module = True    # noqa: SLF001 -- torch's own attributes
        m._fsdp_use_orig_params = True      # noqa: SLF001

    for r in roots:
        dfs(r)
