"""Which module a class or a function's globals belong to, for ``value_text.deep_text``
(adversarial round 63b): a class that is a loaded module's global is read with that module's
globals, a library's class by identity, a function's private globals with what they hold.
Every lookup goes through C members (``type.__dict__``'s descriptors, ``ModuleType``'s
``__dict__``): no code of the value's runs.
"""

from __future__ import annotations

import functools
import sys
import types
from typing import Any

__all__ = ["CLASS_DICT", "HEAPTYPE", "MRO", "FLAGS", "PrivateGlobals", "library_class",
           "private_globals", "loaded_namespaces",
           "register_namespace"]

_MODULE_DICT = types.ModuleType.__dict__["__dict__"].__get__


def module_dict(m: types.ModuleType) -> dict:
    """A module's namespace through ``ModuleType``'s C member (no subclass property runs)."""
    return _MODULE_DICT(m)


CLASS_DICT, MRO = type.__dict__["__dict__"].__get__, type.__dict__["__mro__"].__get__
FLAGS, HEAPTYPE = type.__dict__["__flags__"].__get__, 1 << 9
_GLOBALS = types.FunctionType.__globals__.__get__
_BUILTINS = sys.modules["builtins"]


_NAMESPACES: dict[int, dict] = {}     # the train file's namespace (not in sys.modules)


def register_namespace(ns: dict) -> None:
    """A namespace ``step_state`` reads as a module's although ``sys.modules`` does not hold it
    (``contract.read_train_file``'s: the train file's globals, R63d-3)."""
    _NAMESPACES[id(ns)] = ns


def loaded_namespaces() -> set[int]:
    """The ids of the namespaces read as modules': every module ``sys.modules`` holds (by
    ``ModuleType``'s own member) and the train file's (:func:`register_namespace`)."""
    return {id(module_dict(m)) for m in list(dict.values(sys.modules))
            if issubclass(type(m), types.ModuleType)} | set(_NAMESPACES)


_PARTIAL_FUNC = functools.partial.__dict__["func"].__get__   # (partial's own C member)


_UNWRAPS = 8


def _function_of(v: Any) -> Any:
    """The Python function ``v`` is, binds (a method) or wraps (a ``functools.partial``, of a
    method too), through up to :data:`_UNWRAPS` such layers (R65e-1: three were one too
    many); :data:`TOO_MANY` past that; None when it is none of them. No code of ``v``'s runs."""
    for _ in range(_UNWRAPS + 1):
        t = type(v)
        if t is types.FunctionType:
            return v
        if t is types.MethodType:
            v = v.__func__
        elif issubclass(t, functools.partial):
            v = _PARTIAL_FUNC(v)
        else:
            return None
    return TOO_MANY


TOO_MANY = object()     # (a value wrapped past _UNWRAPS layers: unreadable)


class PrivateGlobals:
    """One fingerprint's reading of functions' private globals, for the process state's
    reading of other modules (``process_state``): a function a module holds (as itself, a
    bound method's or a ``partial``'s) whose globals are no loaded module's namespace and not
    the train file's (``exec``'d into a dict of its own, a second copy of a library file) is
    read with those globals, each by what it names as a module's globals are (``read``:
    ``value_text._global_text``), so a counter kept there is seen (R65c-1, R65d-1, R65d-2).
    A module imported while reading (``op_guard``, lazily) counts once met."""

    def __init__(self, read: Any, too_deep: str) -> None:
        self.read, self.too_deep = read, too_deep
        self.spaces: set[int] = set()
        self.texts: dict[int, tuple[Any, str]] = {}

    def foreign(self, f: types.FunctionType) -> bool:
        """``f``'s globals are no module's namespace (looked up again on a miss)."""
        if id(_GLOBALS(f)) in self.spaces:
            return False
        self.spaces.update(loaded_namespaces())
        return id(_GLOBALS(f)) not in self.spaces

    def text(self, v: Any, depth: int = 0) -> str:
        """``""``, or ``:globals[...]`` when ``v``'s function has private globals: each value
        by ``read`` and, a function with private globals of its own, with those (R65e-3: a
        chain of two), to :data:`_UNWRAPS` levels (``too_deep`` past them, or past as many
        wrappers); a namespace met again by its place (``ref``)."""
        f = _function_of(v)
        if f is TOO_MANY or depth > _UNWRAPS:
            return ":" + self.too_deep
        if f is None or not self.foreign(f):
            return ""
        g = _GLOBALS(f)
        hit = self.texts.get(id(g))
        if hit is None:
            self.texts[id(g)] = (g, f"ref{len(self.texts)}")     # (while it is read)
            hit = self.texts[id(g)] = (g, repr([
                (k if type(k) is str else f"<key {_QUALNAME(type(k))}>",
                 self.read(k, x), self.text(x, depth + 1))
                for k, x in sorted(dict.items(g), key=_key_order)
                if not (type(k) is str and k == "__builtins__"
                        and (x is _BUILTINS or x is module_dict(_BUILTINS)))]))
        return ":globals" + hit[1]


def private_globals(f: types.FunctionType) -> list[Any]:
    """``f``'s globals' values when they are not a loaded module's namespace (``step_state``
    reads those, and the train file's) but a dict of its own (R63b-3: a handler ``exec``'d into
    ``{"n": 0}``; a namedtuple's ``__new__``), less the builtins ``exec`` put there (read as
    ``builtins``)."""
    g = _GLOBALS(f)
    if id(g) in _NAMESPACES:
        return []
    m = sys.modules.get(f.__module__) if type(f.__module__) is str else None
    if m is not None and issubclass(type(m), types.ModuleType) and module_dict(m) is g:
        return []         # (functools.wraps copies another module's name: look them all up)
    if id(g) in loaded_namespaces():
        return []
    return [v for k, v in sorted(dict.items(g), key=_key_order)     # (no key's own __str__
            if not (type(k) is str and k == "__builtins__"      # or __eq__ runs)
                    and (v is _BUILTINS or v is module_dict(_BUILTINS)))]


def _key_order(e: tuple[Any, Any]) -> tuple[int, str]:
    """A namespace entry's place: str keys by text, then any other by its type's name
    (insertion order among those: the sort is stable)."""
    k = e[0]
    return (0, k) if type(k) is str else (1, _QUALNAME(type(k)))


_QUALNAME = type.__dict__["__qualname__"].__get__


def library_class(k: type) -> bool:
    """``k`` existed before the train file ran (the capture's baseline, ``op_guard``) and is
    held under its qualified name by the loaded module its ``__module__`` names: a library's
    class, whose namespace ``deep_text`` reads by identity only (``weakref.finalize``'s holds
    every finalizer, sympy's classes their caches; a library class's data attributes are
    R11-6's open family). Not a class the train file made and bound in a module (R63d-2)."""
    from spec_lang.torch_frontend.op_guard import current_baseline  # noqa: PLC0415

    mod = CLASS_DICT(k).get("__module__")
    m = sys.modules.get(mod) if type(mod) is str else None
    if m is None or not issubclass(type(m), types.ModuleType):
        return False
    ns: Any = module_dict(m)
    found: Any = None
    for part in _QUALNAME(k).split("."):
        found = dict.get(ns, part) if type(ns) is dict else None
        if not issubclass(type(found), type):
            return False
        ns = dict(CLASS_DICT(found))
    return found is k and id(k) in current_baseline().types
