"""Process-wide registries a training step can change without touching any value the rest of
:mod:`spec_lang.torch_frontend.step_state` reads (adversarial round 40b, stop 41):

* the registries of the abstract base classes every loaded module holds (``numbers.Number.
  register(Cfg)`` in the step makes ``isinstance(cfg, numbers.Number)`` true in the next one:
  finding R40b-2) and ``abc``'s global cache token (a ``register`` anywhere drops every ABC's
  negative cache: R40b-3);
* the ``sys.modules`` entries that were not made by an import (a ``types.ModuleType`` made by
  hand and put there by the step, read by the next one through ``sys.modules``: R40b-5).
  A module really imported during the step is not a change (torch imports lazily, on one side
  only; its globals start from their import state, a stated assumption); anything else added
  to ``sys.modules`` is.

Each is an entry of the step's state: a change during the step is a change of the step
(UNKNOWN naming the class or the key, ``docs/unknown.md#step-state``).
"""

from __future__ import annotations

import _imp
import abc
import functools
import importlib._bootstrap_external
import importlib.machinery
import importlib.util
import os
import sys
import types
from collections.abc import Mapping
from typing import Any

from spec_lang.torch_frontend.value_text import _qual, _type_module, key_text, module_dict


def _qualname(c: type) -> str:
    return type.__dict__["__qualname__"].__get__(c)

__all__ = ["ABC_REGISTRY", "ABC_TOKEN", "NOT_IMPORTED", "FILE_COPY", "abc_classes",
           "registry_state", "import_origin", "import_made", "file_copies"]

# prefix of an ABC's registry entry: + "<module>.<qualname>" (+ " #n" for a second class of
# that name)
ABC_REGISTRY = "the registry of the abstract class "
ABC_TOKEN = ("the token of abc's caches (abc.get_cache_token(): a register drops every "
             "negative cache)")
# prefix of a sys.modules entry no import made: + its key + NOT_IMPORTED_END
NOT_IMPORTED = "the sys.modules entry "
NOT_IMPORTED_END = " (not made by an import)"
_BUILTIN_ORIGINS = ("built-in", "frozen")
# prefix of a loaded module's entry when another module object in ``sys.modules`` was loaded
# from the same file (:func:`file_copies`): + its key
FILE_COPY = "a module loaded from a file another loaded module came from: "
_SPEC = importlib.machinery.ModuleSpec
_BUILTIN_IMPORTER = importlib.machinery.BuiltinImporter
_FROZEN_IMPORTER = importlib.machinery.FrozenImporter
_FUNCTION = types.FunctionType
_SOURCE_FROM_CACHE = importlib.util.source_from_cache
_FILE_LOADERS = (importlib.machinery.SourceFileLoader, importlib.machinery.SourcelessFileLoader,
                 importlib.machinery.ExtensionFileLoader)
_FUNC_GLOBALS = _FUNCTION.__dict__["__globals__"].__get__
_FUNC_CODE = _FUNCTION.__dict__["__code__"].__get__
_HELD_BY = " held by its parent "


def _module_dicts() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for name, mod in list(sys.modules.items()):
        if not issubclass(type(mod), types.ModuleType):   # (no ``__class__`` property read)
            continue
        try:
            out.append((name, vars(mod)))
        except TypeError:           # a module whose namespace is not a dict
            continue
    return out


def abc_classes() -> list[abc.ABCMeta]:
    """Every ``abc.ABCMeta`` class a loaded module holds as a global (one level: the standard
    library's ``collections.abc``, ``numbers``, ``io``, ``os.PathLike``, other packages' and the
    user's), each once, in ``sys.modules`` order. Reads each value's type only (a module global
    whose ``__class__`` is a property, ``torch.distributed.reduce_op``, is not asked). About
    8 ms with torch and its distributed packages loaded (415 classes). Source: R40b-2."""
    seen: dict[int, abc.ABCMeta] = {}
    for _, d in _module_dicts():
        for v in list(d.values()):
            if issubclass(type(v), abc.ABCMeta):
                seen.setdefault(id(v), v)
    return list(seen.values())


def _registry(cls: abc.ABCMeta) -> str:
    """The live classes registered with ``cls``, each ``module:qualname@id`` (by identity in
    this process only: the step's before and after are read in one process), with ``!`` after
    a class its module does not hold under its qualified name (made elsewhere)."""
    refs = abc._get_dump(cls)[0]  # noqa: SLF001 -- a set of weak references
    live = (c for c in (r() for r in refs) if c is not None)
    return ",".join(sorted(f"{_type_module(c)}:{_qualname(c)}@{id(c):x}"
                           + ("" if _held_by_module(c) else "!") for c in live))


def _held_by_module(c: type) -> bool:
    x: Any = sys.modules.get(_type_module(c))
    for part in _qualname(c).split("."):
        x = (vars(x) if isinstance(x, (type, types.ModuleType)) else {}).get(part)
    return x is c


def registry_state() -> dict[str, str]:
    """Entry -> fingerprint: every module-level ABC's registry (:func:`abc_classes`; the value
    starts with the class's defining module, ``in <module>:``, so that a class first seen after
    the step, defined by a module imported during it, is told apart: :func:`import_made`),
    ``abc.get_cache_token()``, and every ``sys.modules`` entry not made by an import
    (:func:`import_origin`) by its type and identity. Source: R40b-2, R40b-3, R40b-5."""
    out: dict[str, str] = {ABC_TOKEN: str(abc.get_cache_token())}
    for cls in abc_classes():
        key = f"{ABC_REGISTRY}{_qual(cls)}"
        n = 1
        while key in out:          # two classes of one name: kept apart, in scan order
            n += 1
            key = f"{ABC_REGISTRY}{_qual(cls)} #{n}"
        out[key] = f"in {_type_module(cls)}:{_registry(cls)}"
    for key, mod in list(dict.items(sys.modules)):
        why = import_origin(mod)
        if why is not None:
            name = key_text(key)     # (a key that is no str: by its text, R58e-4)
            parent, _, last = name.rpartition(".") if type(key) is str else ("", "", name)
            held = parent and vars(sys.modules.get(parent) or types).get(last) is mod
            out[f"{NOT_IMPORTED}{name}{NOT_IMPORTED_END}"] = \
                f"{why}:{_qual(type(mod))}@{id(mod):x}" + \
                (f"{_HELD_BY}{parent}" if held else "")
    return out


def import_origin(mod: Any) -> str | None:
    """None when ``mod`` was made by an import: a module whose ``__spec__`` is an exact
    ``ModuleSpec`` with an origin file that exists, loaded by an exact file loader of
    importlib's whose ``path`` is that file, or with the built-in / frozen origin of a module
    the interpreter builds in / freezes under the spec's name, loaded by importlib's own
    importer and held by ``sys.modules`` under that name, or, without a spec, a ``__file__``
    that exists; else why not (``"not a module"``, ``"no spec, no file"``, ``"a spec of
    another type"``, ``"no loader"``, ``"no origin"``, ``"a frozen origin of a module that is
    not frozen"`` (or built-in), ``"origin not found"``, ``"a loader that is not importlib's
    own for its origin"``). The spec is read through its own ``__dict__`` (no attribute code
    runs). A module made by hand with a copied spec of a real file passes (a stated limit; one of a
    loaded module's file is a copy: :func:`file_copies`). Source: R40b-5; R66a-1 (a copy's
    spec given a ``"frozen"`` origin, or made a ``ModuleSpec`` subclass, after its load);
    R66b-2 (the spec's name set to ``"os"`` too: a built-in / frozen module is loaded by
    importlib's own importer and is ``sys.modules``' entry of its spec's name); R66d-1 (a
    file origin is loaded by an exact file loader of importlib's whose ``path`` is that file:
    ``spec.loader`` replaced and the origin rewritten hid a copy)."""
    if not issubclass(type(mod), types.ModuleType):
        return "not a module"
    d = module_dict(mod)
    if type(d) is not dict:
        return "no namespace"
    spec = dict.get(d, "__spec__")
    if spec is None:
        f = dict.get(d, "__file__")
        return None if type(f) is str and _exists(f) else "no spec, no file"
    if type(spec) is not _SPEC:
        return "a spec of another type"
    sd = object.__getattribute__(spec, "__dict__")
    loader, origin, name = (dict.get(sd, a) for a in ("loader", "origin", "name")) \
        if type(sd) is dict else (None, None, None)
    if loader is None:
        return "no loader"
    if type(origin) is not str:
        return None if _namespace_package(spec) else "no origin"
    if origin in _BUILTIN_ORIGINS:    # (by importlib's own importer, under its own name: R66b-2)
        return None if type(name) is str and dict.get(sys.modules, name) is mod and (
            name in sys.builtin_module_names and loader is _BUILTIN_IMPORTER
            if origin == "built-in" else _imp.is_frozen(name) and loader is _FROZEN_IMPORTER) \
            else f"a {origin} origin of a module that is not {origin}"
    if not _exists(origin):
        return "origin not found"
    ld = object.__getattribute__(loader, "__dict__") if type(loader) in _FILE_LOADERS else None
    path = dict.get(ld, "path") if type(ld) is dict else None
    return None if type(path) is str and _real(path) == _real(origin) else \
        "a loader that is not importlib's own for its origin"     # (R66d-1)


def _namespace_package(spec: Any) -> bool:
    """``spec`` is a namespace package's (no origin; importlib's own ``NamespaceLoader``,
    every search location a directory): ``mpl_toolkits``, which matplotlib's lazy import in
    a step made look like a module made by hand (round 65d, r65d_07: UNKNOWN)."""
    locations = getattr(spec, "submodule_search_locations", None)
    if type(locations) is _NAMESPACE_PATH:     # its stored list (iterating recomputes it)
        own = object.__getattribute__(locations, "__dict__")
        locations = dict.get(own, "_path") if type(own) is dict else None
    return type(getattr(spec, "loader", None)) is importlib.machinery.NamespaceLoader \
        and type(locations) is list and all(type(p) is str and os.path.isdir(p)
                                            for p in list.copy(locations))


# importlib's own namespace path (no other iterable is read: a hand-made one's ``__iter__``
# ran inside the fingerprint and its exception ended the capture, R65g-2)
_NAMESPACE_PATH = importlib._bootstrap_external._NamespacePath  # noqa: SLF001


def file_copies(loaded: list[tuple[str, Any]]) -> set[str]:
    """The names (``sys.modules`` keys' texts) of the modules in ``loaded`` that share their
    file with another module object there: any file it names as its source
    (:func:`_files`), compared as real paths. A lazy import makes a module from a file no loaded
    module came from; a step that loads a file once more under a fresh name
    (``importlib._bootstrap._load`` of a copied spec, kept in ``sys.modules``) counted its
    copies, every one a new module and no change (R65d-3): such a module's entry is made under
    :data:`FILE_COPY`, which no import exempts. Reads the spec's own ``__dict__`` only (an exact
    ``ModuleSpec``: no attribute code of the module's runs). Raises nothing."""
    global _CHILDREN
    if _CHILDREN is None:           # (of all of sys.modules, whatever ``loaded`` holds)
        _CHILDREN = _children_now()
    by_file: dict[str, set[int]] = {}
    names: dict[str, set[str]] = {}
    for name, mod in loaded:
        if not issubclass(type(mod), types.ModuleType):
            continue
        d = module_dict(mod)      # (no ``__dict__`` property of a subclass runs)
        if type(d) is not dict:
            continue
        spec = dict.get(d, "__spec__")
        paths = {_real(p) for p in _files(d, spec)}
        if spec is None and len(paths) == 1 and _extension_child(name, mod, next(iter(paths))):
            continue
        for path in paths:
            by_file.setdefault(path, set()).add(id(mod))
        names[name] = paths
    return {name for name, paths in names.items() if any(len(by_file[p]) > 1 for p in paths)}


def _files(d: dict, spec: Any) -> list[str]:
    """Every file a module's namespace ``d`` names as its source: its spec's origin (an exact
    ``ModuleSpec``), its spec's and its own ``__loader__``'s ``path``, ``__file__``, the source
    of ``__cached__``, and the files its functions defined there were compiled from; built-in
    / frozen origins and ``<...>`` names left out. A copy whose spec names another existing
    file still names its own elsewhere (R66b-3, R66c-1: all of them rewritten but
    ``__loader__`` and ``__cached__``)."""
    out = [dict.get(d, "__file__"), _loader_path(dict.get(d, "__loader__"))]
    cached = dict.get(d, "__cached__")
    if type(cached) is str:
        try:
            out.append(_SOURCE_FROM_CACHE(cached))
        except (ValueError, NotImplementedError):
            pass
    if type(spec) is _SPEC:
        sd = object.__getattribute__(spec, "__dict__")
        if type(sd) is dict:
            out += [dict.get(sd, "origin"), _loader_path(dict.get(sd, "loader"))]
    out += [_FUNC_CODE(v).co_filename for v in list(dict.values(d))
            if type(v) is _FUNCTION and _FUNC_GLOBALS(v) is d]
    return [p for p in out if type(p) is str and p not in _BUILTIN_ORIGINS and p[:1] != "<"]


def _loader_path(loader: Any) -> str | None:
    """The ``path`` of an exact file loader of importlib's (its own ``__dict__``), else None."""
    ld = object.__getattribute__(loader, "__dict__") if type(loader) in _FILE_LOADERS else None
    return dict.get(ld, "path") if type(ld) is dict else None


# the C extensions' submodules of the first reading (before the train file's step: R66d-2,
# one made by hand in each step on torch._C's file, held by it, was exempt), kept alive
_CHILDREN: dict[int, Any] | None = None


def _extension_child(name: str, mod: Any, path: str) -> bool:
    """``mod`` (no spec) is a submodule a C extension made in its parent's file, held by the
    parent under its last name (``torch._C._autograd`` in ``torch/_C.*.so``), and was one at
    the first reading in this process (the first fingerprint, before the first step: R66d-2).
    Raises nothing."""
    return (_CHILDREN is None or id(mod) in _CHILDREN) and _held_child(name, mod, path)


def _children_now() -> dict[int, Any]:
    """Every spec-less module of ``sys.modules`` :func:`_held_child` takes, by identity."""
    out: dict[int, Any] = {}
    for key, mod in list(dict.items(sys.modules)):
        d = module_dict(mod) if issubclass(type(mod), types.ModuleType) else None
        if type(key) is not str or type(d) is not dict or dict.get(d, "__spec__") is not None:
            continue
        paths = {_real(p) for p in _files(d, None)}
        if len(paths) == 1 and _held_child(key, mod, next(iter(paths))):
            out[id(mod)] = mod
    return out


def _held_child(name: str, mod: Any, path: str) -> bool:
    """``mod`` is held by its parent (by ``name``) under its last name, in the parent's
    C extension file ``path``."""
    parent, _, last = name.rpartition(".")
    up = dict.get(sys.modules, parent) if parent else None
    if not path.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)) \
            or not issubclass(type(up), types.ModuleType):
        return False
    ud = module_dict(up)
    spec = dict.get(ud, "__spec__") if type(ud) is dict else None
    sd = object.__getattribute__(spec, "__dict__") if type(spec) is _SPEC else None
    origin = dict.get(sd, "origin") if type(sd) is dict else None
    return type(ud) is dict and dict.get(ud, last) is mod and type(origin) is str \
        and _real(origin) == path


@functools.lru_cache(maxsize=1 << 14)
def _real(path: str) -> str:
    """(cached as :func:`_exists`: a file's real path does not move mid-capture); a path the
    OS cannot take (a NUL byte, a lone surrogate: R66e-1) as it is, naming no file."""
    try:
        return os.path.normcase(os.path.realpath(path))
    except (ValueError, UnicodeError):
        return path


@functools.lru_cache(maxsize=1 << 14)
def _exists(path: str) -> bool:
    """(cached: ~2,000 modules are read per fingerprint; a file does not vanish mid-capture);
    False for a path the OS cannot take (R66e-1)."""
    try:
        return os.path.exists(path)
    except (ValueError, UnicodeError):
        return False


def import_made(before: Mapping[str, str], after: Mapping[str, str],
                module_keys: tuple[str, ...]) -> set[str]:
    """The registry entries the step changed (:func:`registry_state`) only as importing a
    module during it does (torch imports lazily, on one side only: ``networkx`` registers its
    ``Config`` with ``collections.abc.Mapping``; ``pyexpat`` puts its ``errors`` submodule
    into ``sys.modules``): an ABC registry that only gained classes held under their names by
    modules loaded during the step (``module_keys``: the prefixes of ``process_state``'s
    per-module entries; a module with such an entry after the step and none before), an ABC
    first seen after the step with an empty registry or defined by such a module, a
    ``sys.modules`` entry without a spec held by its parent, such a module, and the cache
    token when it moved by exactly the number of such registrations (a ``register`` no
    registry read shows, a throwaway ABC's, is not explained). Source: R40b-2, R40b-5."""
    def new_module(mod: str) -> bool:
        return not any(p + mod in before for p in module_keys) and \
            any(p + mod in after for p in module_keys)

    out: set[str] = set()
    explained, unexplained = 0, False
    for k, v in after.items():
        if k.startswith(ABC_REGISTRY):
            mod, _, reg = v.removeprefix("in ").partition(":")
            old = before.get(k)
            if old is None and (not reg or new_module(mod)):
                out.add(k)
                explained += len(reg.split(",")) if reg else 0
                continue
            if old is None or old == v:
                continue
            was = set(old.removeprefix("in ").partition(":")[2].split(",")) - {""}
            now = set(reg.split(",")) - {""}
            gained = now - was
            if was <= now and all(not c.endswith("!") and new_module(c.partition(":")[0])
                                  for c in gained):
                out.add(k)
                explained += len(gained)
            else:
                unexplained = True
        elif k.startswith(NOT_IMPORTED) and k not in before and _HELD_BY in v \
                and new_module(v.rpartition(_HELD_BY)[2]):
            out.add(k)
    try:
        moved = int(after.get(ABC_TOKEN, "0")) - int(before.get(ABC_TOKEN, "0"))
    except ValueError:
        moved = -1
    if moved == explained and not unexplained:
        out.add(ABC_TOKEN)
    return out
