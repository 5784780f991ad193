"""Which module a class or a function's globals belong to, for ``value_text.deep_text``
(adversarial round 63b): a class that is a loaded module's global is read with that module's
globals, a library's object by identity, a function's private globals with what they hold.
Every lookup goes through C members (``type.__dict__``'s descriptors, ``ModuleType``'s
``__dict__``): no code of the value's runs.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import types
from typing import Any

__all__ = ["CLASS_DICT", "HEAPTYPE", "MRO", "FLAGS", "library_class", "module_class",
           "private_globals"]

_MODULE_DICT = types.ModuleType.__dict__["__dict__"].__get__


def module_dict(m: types.ModuleType) -> dict:
    """A module's namespace through ``ModuleType``'s C member (no subclass property runs)."""
    return _MODULE_DICT(m)


CLASS_DICT, MRO = type.__dict__["__dict__"].__get__, type.__dict__["__mro__"].__get__
FLAGS, HEAPTYPE = type.__dict__["__flags__"].__get__, 1 << 9
_GLOBALS = types.FunctionType.__globals__.__get__
_BUILTINS = sys.modules["builtins"]


def private_globals(f: types.FunctionType) -> list[Any]:
    """``f``'s globals' values when they are not a loaded module's namespace (``step_state``
    reads those) but a dict of its own (R63b-3: a handler ``exec``'d into ``{"n": 0}``; a
    namedtuple's ``__new__``), less the builtins ``exec`` put there (read as ``builtins``)."""
    g = _GLOBALS(f)
    m = sys.modules.get(f.__module__) if type(f.__module__) is str else None
    if m is not None and issubclass(type(m), types.ModuleType) and module_dict(m) is g:
        return []         # (functools.wraps copies another module's name: look them all up)
    if any(issubclass(type(m), types.ModuleType) and module_dict(m) is g
           for m in list(sys.modules.values())):
        return []
    return [v for k, v in sorted(dict.items(g), key=lambda e: str(e[0]))
            if not (k == "__builtins__" and (v is _BUILTINS or v is module_dict(_BUILTINS)))]


_NAME = type.__dict__["__name__"].__get__


def module_class(k: type) -> bool:
    """``k`` is a global of a loaded module under its own name: its namespace is read with that
    module's globals (the user's by ``step_state``; a library's data attributes are R11-6's
    open family), not again here (``weakref.finalize``'s holds every finalizer, sympy's
    classes their caches). A class claiming a module that does not hold it is not."""
    mod = CLASS_DICT(k).get("__module__")
    m = sys.modules.get(mod) if type(mod) is str else None
    return m is not None and issubclass(type(m), types.ModuleType) and \
        module_dict(m).get(_NAME(k)) is k


_STDLIB = tuple({os.path.join(sysconfig.get_paths()[k], "") for k in ("stdlib", "platstdlib")})


def library_class(k: type) -> bool:
    """``k`` is a module class (:func:`module_class`) of torch, numpy, the standard library or
    an installed package (a builtin module, or a file under the standard library or a
    ``site-packages`` / ``dist-packages`` directory)."""
    if not module_class(k):
        return False
    mod = CLASS_DICT(k)["__module__"]
    if mod.split(".")[0] in ("torch", "numpy"):
        return True
    f = module_dict(sys.modules[mod]).get("__file__")
    return f is None or type(f) is str and (f.startswith(_STDLIB) or "-packages" in f)
