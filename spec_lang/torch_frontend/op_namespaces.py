"""torch's operator and script-class namespaces (``torch.ops``, ``torch.classes``) as the
process-state fingerprint (:mod:`spec_lang.torch_frontend.process_state`) reads them.

torch fills them on first use, per process and per side (``torch.ops._c10d_functional`` when
the parallel step first calls a functional collective; an ``OpOverloadPacket`` per operator name
looked up): caches of the dispatcher's operators, read neither as a torch module's globals nor
as another module's. What skipping them let through (round 65, ``tests/adversarial/
test_round65a.py``, ``test_round65b.py``):

* R65a-1, R65b-2: any ``sys.modules`` entry named ``torch.ops.*`` / ``torch.classes.*`` was
  skipped, a module the train file made by hand and put there too (a counter or a rebound
  function in it, read nowhere): only torch's own two objects are skipped now
  (:func:`torch_namespace`), anything else under those names is read as another module;
* their own data: a number or string the step keeps in ``torch.ops``, ``torch.classes`` or one
  of their namespaces (``torch.ops.aten.__dict__``) is read by value (:func:`namespace_data`).
  Objects there other than torch's namespaces and the operators cached under their own
  names (a packet ``aten::k`` under ``k``: another bound there is read, R65g-1) are read by
  what they are (``_global_text``); what such an object holds, changed in place, is not (the
  R11-6 family, docs/torch.md "Where the fingerprint stops").
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import torch
import torch._classes
import torch._ops

__all__ = ["LAZY_NAMES", "torch_namespace", "namespace_data", "NAMESPACE_DATA"]

LAZY_NAMES = ("torch.ops", "torch.classes")
NAMESPACE_DATA = "torch's op and class namespaces (torch.ops, torch.classes)"
# bound when the capture starts, before the train file runs
_OWN = {"torch.ops": torch.ops, "torch.classes": torch.classes}
_MODULE_DICT = types.ModuleType.__dict__["__dict__"].__get__
# the namespaces and operators torch caches there on first use (exact types)
_NAMESPACE_TYPES = (torch._ops._OpNamespace, torch._ops._HigherOrderNamespace,  # noqa: SLF001
                    torch._classes._ClassNamespace)  # noqa: SLF001
_PACKET = torch._ops.OpOverloadPacket  # noqa: SLF001
_HOO = torch._ops.HigherOrderOperator  # noqa: SLF001
_HIGHER_ORDER = torch._ops._higher_order_ops  # noqa: SLF001 -- name -> operator (a dict)
_MRO = type.__dict__["__mro__"].__get__


def lazy_name(name: str) -> bool:
    """``name`` (a ``sys.modules`` key's text) is under ``torch.ops`` or ``torch.classes``."""
    return name in LAZY_NAMES or name.startswith(tuple(n + "." for n in LAZY_NAMES))


def torch_namespace(name: str, mod: Any) -> bool:
    """The ``sys.modules`` entry ``name`` is torch's own ``torch.ops`` or ``torch.classes``
    object (by identity), skipped as a module and read by :func:`namespace_data`."""
    return type(name) is str and mod is _OWN.get(name, _OWN)   # (a key's own __eq__ never runs)


def _cached(where: str, k: Any, v: Any) -> bool:
    """What the namespace ``where``'s ``__getattr__`` caches under ``k``: the operator packet
    of that very name (``aten::k``: another packet bound there, ``torch.ops.aten.maximum``
    under ``r65g_flag``, is read: R65g-1), or the higher-order operator torch's registry
    holds under that name."""
    if type(k) is not str:
        return False
    t = type(v)
    if t is _PACKET:
        own = object.__getattribute__(v, "__dict__")
        name = dict.get(own, "_qualified_op_name") if type(own) is dict else None
        return type(name) is str and name == f"{where.rpartition('.')[2]}::{k}"
    return _HOO in _MRO(t) and dict.get(_HIGHER_ORDER, k) is v


def _own_data(where: str, kt: str, v: Any) -> bool:
    """What a namespace's ``__init__`` sets: its module dunders, ``__name__`` its dotted path,
    ``name`` its last part (torch looks operators up by it)."""
    if kt in ("__doc__", "__package__", "__loader__", "__spec__"):
        return v is None
    if kt == "__name__":
        return type(v) is str and v == where
    return kt == "name" and type(v) is str and v == where.rpartition(".")[2]


def namespace_data(global_text: Callable[[Any, Any], str | None],
                   key_text: Callable[[Any], str]) -> str:
    """The text of what ``torch.ops``, ``torch.classes`` and their namespaces hold besides
    torch's cached namespaces and operators and what a namespace's ``__init__`` sets (module
    docstring): numbers and strings by value, other objects by ``global_text``; the namespace
    lists ``_dir`` (filled on first use) skipped. Raises nothing: a namespace whose dict is
    not a dict is read as its type."""
    out: list[tuple[str, str]] = []
    todo: list[tuple[str, Any]] = list(_OWN.items())
    done: set[int] = set()
    while todo:
        where, ns = todo.pop()
        if id(ns) in done:
            continue
        done.add(id(ns))
        d = _MODULE_DICT(ns)
        if type(d) is not dict:
            out.append((where, f"<namespace of {type(d).__name__}>"))
            continue
        for k, v in list(dict.items(d)):
            kt = key_text(k)
            if type(v) in _NAMESPACE_TYPES:
                todo.append((f"{where}.{kt}", v))
            elif _cached(where, k, v) or _own_data(where, kt, v) or (kt == "_dir"
                                                                and type(v) is list):
                continue
            else:
                t = global_text(k, v)
                if t is not None:
                    out.append((f"{where}.{kt}", t))
    return repr(sorted(out))
