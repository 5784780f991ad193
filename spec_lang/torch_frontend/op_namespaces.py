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

from spec_lang.torch_frontend.value_text import _digest, _qual, identity_text

__all__ = ["LAZY_NAMES", "torch_namespace", "namespace_data", "NAMESPACE_DATA",
           "NAMESPACE_FILLS", "fills_dropped"]

LAZY_NAMES = ("torch.ops", "torch.classes")
NAMESPACE_DATA = "torch's op and class namespaces (torch.ops, torch.classes)"
NAMESPACE_FILLS = "the operators and namespaces torch cached in torch.ops and torch.classes"
FILL_SEP = "\n"     # (no entry holds one: its path is written by ``str.__repr__``)
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


def _cached(where: str, k: Any, v: Any) -> list[tuple[str, Any]] | None:
    """What the namespace ``where``'s ``__getattr__`` caches under ``k``, as the list of the
    entries torch's own modules set on it besides (:data:`_TORCH_SET`), or
    None: the operator packet torch makes for that very name (``aten::k``,
    :func:`_torch_packet`: another packet bound there, ``torch.ops.aten.maximum`` under
    ``r65g_flag``, is read: R65g-1; so is one forged by hand with that name, R65h-1), or the
    higher-order operator torch's registry holds under that name, which is its own
    (``_name``: torch's ``cond`` registered under a new key is read, R65h-2)."""
    if type(k) is not str:
        return None
    t = type(v)
    if t is _PACKET:
        return _torch_packet(f"{where.rpartition('.')[2]}::{k}", k, v)
    if _HOO not in _MRO(t) or dict.get(_HIGHER_ORDER, k) is not v:
        return None
    own = object.__getattribute__(v, "__dict__")
    name = dict.get(own, "_name") if type(own) is dict else None
    return [] if type(name) is str and name == k else None


# what torch's own modules set on packets they define at torch's import (``torch._prims``'s
# ``_make_prim``: ``prims::*``, ``rngprims::*``): read by value, in the packet's fill line
_TORCH_SET = frozenset({"__doc__", "schema", "return_type", "prim_impl", "prim_meta_impl",
                        "impl_aten"})
_BUILTIN = types.BuiltinFunctionType
_BUILTIN_DOC = _BUILTIN.__dict__["__doc__"].__get__    # (C's method docstring, read-only)
# (``TorchBindOpOverload``: an overload taking a script object, ``c10d::allreduce_.default``)
_OVERLOADS = (torch._ops.OpOverload, torch._ops.TorchBindOpOverload)  # noqa: SLF001
# torch's own lookups, bound before the train file runs
_JIT_OPERATION, _SCHEMA = torch._C._jit_get_operation, torch._C._get_schema  # noqa: SLF001
_CLASS_TYPE = torch.ClassType
_FACTS: dict[str, tuple[list[str], bool] | None] = {}


def _facts(q: str) -> tuple[list[str], bool] | None:
    """What ``OpOverloadPacket.__init__`` computes for the operator ``q`` from the
    dispatcher: its overload names and whether a schema takes a script object
    (``_has_torchbind_op_overload``); None when torch has no such operator. Cached per
    process (an operator's schemas do not change; one the step registers is refused by the
    kernel guard)."""
    if q not in _FACTS:
        try:
            _, names = _JIT_OPERATION(q)
            names = list(names) if type(names) is list else None
            bind = names is not None and any(
                isinstance(a.type, _CLASS_TYPE) for n in names for a in _SCHEMA(q, n).arguments)
        except (RuntimeError, TypeError):
            names = None
        _FACTS[q] = None if names is None else (names, bind)
    return _FACTS[q]


def _torch_packet(q: str, k: str, v: Any) -> list[tuple[str, Any]] | None:
    """The :data:`_TORCH_SET` entries of ``v`` (an exact ``OpOverloadPacket``) when it is
    what torch's ``_OpNamespace.__getattr__`` makes for the operator ``q`` (``aten::mul``)
    under ``k`` (``mul``), else None. Torch's packet: its own ``__dict__`` names ``q`` and
    ``k`` and the module ``torch._ops.<ns>``, its ``_op`` is a builtin
    ``torch._C._jit_get_operation(q)`` made (the docstring C writes for it,
    ``Automatically bound operator 'q'``, which Python code cannot set on a builtin), its
    ``_overload_names`` and ``_has_torchbind_op_overload`` are what torch computes for ``q``
    (:func:`_facts`), and every other entry is an ``OpOverload`` of this packet named
    ``q.<entry>``, each listed in ``_dir`` in the order cached (the packet's
    ``__getattr__``), or one of :data:`_TORCH_SET` (returned: read by value with the packet's
    fill, R66a-2). A
    packet made by hand from another operator's ``__dict__`` (``OpOverloadPacket.__new__``,
    the name set: R65h-1) fails on ``_op``. Not checked: what runs an overload cached in a
    genuine-looking packet (its ``_op`` carries no name: a stated limit, docs/torch.md)."""
    own = object.__getattribute__(v, "__dict__")
    if type(own) is not dict:
        return None
    name, short, mod = (dict.get(own, a) for a in ("_qualified_op_name", "__name__",
                                                   "__module__"))
    if type(name) is not str or name != q or type(short) is not str or short != k \
            or type(mod) is not str or mod != "torch._ops." + q.partition("::")[0]:
        return None
    op = dict.get(own, "_op")
    doc = _BUILTIN_DOC(op) if type(op) is _BUILTIN else None
    facts = _facts(q)
    if type(doc) is not str or facts is None or not doc.startswith(
            f"{k}(*args, **kwargs) -> object\n\nAutomatically bound operator '{q}' with"):
        return None
    names, bind = dict.get(own, "_overload_names"), dict.get(own, "_has_torchbind_op_overload")
    if not _str_list(names) or names != facts[0] or type(bind) is not bool \
            or bind is not facts[1]:
        return None
    extras, cached = [], []
    for key, x in list(dict.items(own)):
        if type(key) is not str:
            return None
        if key in _TORCH_SET:
            extras.append((key, x))
        elif key not in _PACKET_KEYS:
            if not _overload_of(v, q, key, x):
                return None
            cached.append(key)
    listed = dict.get(own, "_dir")
    return extras if _str_list(listed) and listed == cached else None


_PACKET_KEYS = frozenset({"_qualified_op_name", "__name__", "__module__", "_op",
                          "_overload_names", "_has_torchbind_op_overload", "_dir"})


def _cached_overloads(v: Any) -> list[tuple[str, Any]]:
    """The overloads a packet :func:`_torch_packet` took caches (its own ``__dict__``)."""
    own = object.__getattribute__(v, "__dict__")
    return [(o, x) for o, x in list(dict.items(own)) if type(x) in _OVERLOADS]


def _str_list(x: Any) -> bool:
    """An exact list of exact strings (compared with ``==`` only then: no element's code)."""
    return type(x) is list and all(type(e) is str for e in list.copy(x))


def _overload_of(packet: Any, q: str, key: str, x: Any) -> bool:
    """``x`` is an exact ``OpOverload`` (or ``TorchBindOpOverload``) of ``packet`` named as its
    ``__getattr__`` names the overload ``key`` (``aten::mul.Tensor``; ``aten::mul`` for
    ``default``)."""
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
                   key_text: Callable[[Any], str]) -> tuple[str, str]:
    """The text of what ``torch.ops``, ``torch.classes`` and their namespaces hold besides
    torch's cached namespaces and operators and what a namespace's ``__init__`` sets (module
    docstring): numbers and strings by value, other objects by ``global_text``; the namespace
    lists ``_dir`` (filled on first use) skipped. Second, :data:`NAMESPACE_FILLS`'s text: each
    cached namespace, operator and overload by its path and identity (kept alive until
    ``release_kept``; an overload dropped from its packet: R66b-1), with a digest of the
    :data:`_TORCH_SET` entries torch's prims set on a packet (R66a-2: a prim a lazy import
    defines is a fill), one a line, sorted; a step may add to it (torch's lazy fills), never
    drop or replace an entry (R66a-3: ``step_state.state_changes``). Raises nothing: a
    namespace whose dict is not a dict is read as its type."""
    out: list[tuple[str, str]] = []
    fills: list[str] = []
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
            extras = [] if type(v) in _NAMESPACE_TYPES else _cached(where, k, v)
            if extras is not None:
                if type(v) in _NAMESPACE_TYPES:
                    todo.append((f"{where}.{kt}", v))
                # (what torch's prims set on a packet: with it, so that a prim a lazy import
                # defines is a fill, and a value changed in place a replaced entry: R66a-2)
                fills.append(f"{str.__repr__(f'{where}.{kt}')}={identity_text(v)}" + (
                    "" if not extras else " " + _digest(repr(sorted(
                        (a, global_text(a, x)) for a, x in extras)))))
                if type(v) is _PACKET:      # its cached overloads, each a fill (R66b-1)
                    fills.extend(f"{str.__repr__(f'{where}.{kt}.{o}')}={identity_text(x)}"
                                 for o, x in _cached_overloads(v))
            elif _own_data(where, kt, v) or (kt == "_dir" and type(v) is list):
                continue
            else:
                t = global_text(k, v)
                if t is not None:
                    out.append((f"{where}.{kt}", t + _packet_lists(v)))
    return repr(sorted(out)), FILL_SEP.join(sorted(fills))


def _packet_lists(v: Any) -> str:
    """An exact packet's name lists (``_dir``, ``_overload_names``) by value, which
    ``global_text`` reads by type (a packet that is not torch's: R66a-2's ``_dir`` counter)."""
    if type(v) is not _PACKET:
        return ""
    own = object.__getattribute__(v, "__dict__")
    if type(own) is not dict:
        return ""
    lists = [dict.get(own, a) for a in ("_dir", "_overload_names")]
    return repr([list.copy(x) if _str_list(x) else _qual(type(x)) for x in lists])


def fills_dropped(before: str, after: str) -> bool:
    """Whether the step dropped or replaced a cached namespace or operator
    (:data:`NAMESPACE_FILLS`' texts before and after it): one in ``before`` not in
    ``after``; torch only adds (R66a-3)."""
    return not set(before.split(FILL_SEP)) - {""} <= set(after.split(FILL_SEP))
