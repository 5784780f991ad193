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
    torch makes for that very name (``aten::k``, :func:`_torch_packet`: another packet bound
    there, ``torch.ops.aten.maximum`` under ``r65g_flag``, is read: R65g-1; so is one forged
    by hand with that name, R65h-1), or the higher-order operator torch's registry holds
    under that name, which is its own (``_name``: torch's ``cond`` registered under a new key
    is read, R65h-2)."""
    if type(k) is not str:
        return False
    t = type(v)
    if t is _PACKET:
        return _torch_packet(f"{where.rpartition('.')[2]}::{k}", k, v)
    if _HOO not in _MRO(t) or dict.get(_HIGHER_ORDER, k) is not v:
        return False
    own = object.__getattribute__(v, "__dict__")
    name = dict.get(own, "_name") if type(own) is dict else None
    return type(name) is str and name == k


# what ``OpOverloadPacket.__init__`` sets, by type (``_op`` and the overloads: checked apart)
_PACKET_DATA = {"_qualified_op_name": str, "__name__": str, "_overload_names": list,
                "_dir": list, "_has_torchbind_op_overload": bool, "__module__": str}
# what torch's own modules set on packets they define at torch's import (``torch._prims``'s
# ``_make_prim``: ``prims::*``, ``rngprims::*``; ``torch.ops.profiler``): by name, not value
_TORCH_SET = frozenset({"__doc__", "schema", "return_type", "prim_impl", "prim_meta_impl",
                        "impl_aten", "_RecordFunction"})
_BUILTIN = types.BuiltinFunctionType
_BUILTIN_DOC = _BUILTIN.__dict__["__doc__"].__get__    # (C's method docstring, read-only)
# (``TorchBindOpOverload``: an overload taking a script object, ``c10d::allreduce_.default``)
_OVERLOADS = (torch._ops.OpOverload, torch._ops.TorchBindOpOverload)  # noqa: SLF001


def _torch_packet(q: str, k: str, v: Any) -> bool:
    """``v`` (an exact ``OpOverloadPacket``) is what torch's ``_OpNamespace.__getattr__``
    makes for the operator ``q`` (``aten::mul``) under ``k`` (``mul``): its own ``__dict__``
    names ``q`` and ``k``, its ``_op`` is a builtin ``torch._C._jit_get_operation(q)`` made
    (the docstring C writes for it, ``Automatically bound operator 'q'``, which Python code
    cannot set on a builtin), its other data of the types torch's ``__init__`` gives them, and
    every other entry an ``OpOverload`` of this packet named ``q.<entry>`` (cached by the
    packet's ``__getattr__``) or one of the names torch's ``_prims`` sets (:data:`_TORCH_SET`,
    not read). A packet made by hand from another operator's ``__dict__``
    (``OpOverloadPacket.__new__``, the name set: R65h-1) fails on ``_op``. Not checked: what
    runs an overload cached in a genuine-looking packet (its ``_op`` carries no name: a
    stated limit, docs/torch.md)."""
    own = object.__getattribute__(v, "__dict__")
    if type(own) is not dict:
        return False
    name, short = dict.get(own, "_qualified_op_name"), dict.get(own, "__name__")
    if type(name) is not str or name != q or type(short) is not str or short != k:
        return False
    op = dict.get(own, "_op")
    doc = _BUILTIN_DOC(op) if type(op) is _BUILTIN else None
    if type(doc) is not str or not doc.startswith(
            f"{k}(*args, **kwargs) -> object\n\nAutomatically bound operator '{q}' with"):
        return False
    for key, x in list(dict.items(own)):
        if type(key) is not str:
            return False
        if key in _PACKET_DATA:
            if type(x) is not _PACKET_DATA[key]:
                return False
        elif key != "_op" and key not in _TORCH_SET and not _overload_of(v, q, key, x):
            return False
    return True


def _overload_of(packet: Any, q: str, key: str, x: Any) -> bool:
    """``x`` is an exact ``OpOverload`` (or ``TorchBindOpOverload``) of ``packet`` named as its ``__getattr__`` names the
    overload ``key`` (``aten::mul.Tensor``; ``aten::mul`` for ``default``)."""
    if type(x) not in _OVERLOADS:
        return False
    own = object.__getattribute__(x, "__dict__")
    name = dict.get(own, "_name") if type(own) is dict else None
    return dict.get(own, "_overloadpacket") is packet and type(name) is str \
        and name == (q if key == "default" else f"{q}.{key}")


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
