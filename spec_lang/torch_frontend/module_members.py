"""Which module a class or a function's globals belong to, for ``value_text.deep_text``
(adversarial round 63b): a class that is a loaded module's global is read with that module's
globals, a library's class by identity, a function's private globals with what they hold.
Every lookup goes through C members (``type.__dict__``'s descriptors, ``ModuleType``'s
``__dict__``): no code of the value's runs.
"""

from __future__ import annotations

import sys
import types
from typing import Any

__all__ = ["CLASS_DICT", "HEAPTYPE", "MRO", "FLAGS", "library_class", "private_globals",
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


def train_namespaces() -> list[int]:
    """The ids of the train file's namespaces (:func:`register_namespace`)."""
    return list(_NAMESPACES)


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
    if any(issubclass(type(m), types.ModuleType) and module_dict(m) is g
           for m in list(sys.modules.values())):
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
