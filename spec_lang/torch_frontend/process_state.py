"""Process-wide state a training step can leave for the next one, read identity-free
(adversarial findings R8-2, R9-2, R10-1, R10-5, R10-6, R11-2, R11-7, R12-3..5): the
environment, ``builtins``, numpy's global generator, the globals of every loaded module
(torch's by the code they name, the others' with numbers and strings by value), the C-level
state a step can leave entered or set (torch's saved-tensor hooks and mode stacks, the decimal
context, finalizers, threads, the interpreter's and torch's settings). Split from
:mod:`spec_lang.torch_frontend.step_state`, which reads the model, the optimizer and the user's
modules and compares before and after.
"""

from __future__ import annotations

import decimal
import functools
import gc
import os
import sys
import threading
import types
import weakref
from collections.abc import Iterable
from typing import Any

import torch

from spec_lang.torch_frontend.c_registries import c_settings, registry_texts
from spec_lang.torch_frontend.lazy_globals import _lazy_cache
from spec_lang.torch_frontend.module_members import PrivateGlobals
from spec_lang.torch_frontend.op_namespaces import (
    LAZY_NAMES, NAMESPACE_DATA, NAMESPACE_FILLS, lazy_name, namespace_data, torch_namespace)
from spec_lang.torch_frontend.registry_state import FILE_COPY, file_copies, registry_state
from spec_lang.torch_frontend.value_text import (  # noqa: F401 -- re-exported
    _DATA, _KEPT, _NO_CODE, MODULE_DUNDERS, UNCOMPARABLE, UNREADABLE, _base_iter,
    _bytecode_digest, _cell, _data_text, _digest, _dynamo_cache, _function_text, _global_text,
    _ident, _items, _name, _own_items, _plain, _qual, _slots, _type_module, deep_text,
    digest_texts, dunder_text,
    identity_text,
    key_text, module_dict, object_text, one_fingerprint, own_dict, prim_repr, release_kept,
    TOO_DEEP)

__all__ = ["TORCH_MODULE", "OTHER_MODULE", "THREADS", "UNCOMPARABLE", "UNREADABLE",
           "dunder_text", "identity_text", "key_text", "object_text", "own_dict", "prim_repr",
           "release_kept"]

THREADS = "the Python threads running"



# a logger's caches and links to the process's logger tree (F11-2)
_LOGGER_CACHES = frozenset({"_cache", "manager", "parent", "loggerDict", "root"})


# bound before the train file can rebind it (R60c-4, as R32-2)
_GETCONTEXT = decimal.getcontext
_CONTEXT = decimal.Context
_TENSOR, _FLOAT64 = torch.tensor, torch.float64
_MUL, _ITEM = torch._C.TensorBase.mul, torch._C.TensorBase.item  # noqa: SLF001
from torch.utils._python_dispatch import _disable_current_modes as _NO_MODES  # noqa: E402
# every builtin as it was when this module was imported (before the train file runs): the
# fingerprint's own code calls them, so one the train file replaces makes it unreadable
# (R61a-3: ``repr`` / ``sorted`` answering ``[]`` to ``c_settings`` only); read without
# calling a builtin
import builtins as _builtins  # noqa: E402
_BUILTIN_NS = _builtins.__dict__
_BUILTINS_AT_IMPORT = tuple(_builtins.__dict__.items())
_NS_GET = dict.get
_MISSING = object()


# what _c_state and _read_process_state call, bound here, before the train file runs (round
# 61b: a reader replaced at import answered a constant to the fingerprint only, R61b-2..8)
import logging as _logging  # noqa: E402
from spec_lang.torch_frontend.torch_c_state import (  # noqa: E402
    SETTINGS_READERS as _SETTINGS_READERS, plain_text, torch_c_texts)
_GETCWD, _UMASK, _ENVIRON_OBJ = os.getcwd, os.umask, os.environ
import _signal  # noqa: E402
_GETSIGNAL, _VALID_SIGNALS = _signal.getsignal, _signal.valid_signals
_THREADS_NOW = threading.enumerate
_LOGGER, _MANAGER, _PLACEHOLDER = _logging.Logger, _logging.Manager, _logging.PlaceHolder
_CLASS_NS = type.__dict__["__dict__"].__get__     # a class's own namespace, no lookup
_DICT_ITEMS, _DICT_LEN = dict.items, dict.__len__
try:
    import numpy as _np
except ImportError:
    _np = None
_NP_READERS: Any = None
if _np is not None:
    try:   # numpy 2's C getter and print-options context variable, not the Python readers
        #    that look them up when they run (R61d-2)
        from numpy._core._multiarray_umath import _get_extobj_dict as _NP_ERR  # noqa: E402
        from numpy._core.arrayprint import format_options as _NP_PRINT  # noqa: E402
        _NP_READERS = (_NP_ERR, _NP_PRINT.get, _np.random.get_state)
    except ImportError:      # numpy 1: its public readers (their own lookups: R32-2 family)
        _NP_READERS = (_np.geterr, _np.get_printoptions, _np.random.get_state)
# the logger manager and the root logger as logging made them (R61d-4: a second manager put in
# ``Logger.manager`` while the root logger keeps the real one as its own); ``sys.modules`` as
# the interpreter holds it (R61d-5: rebound to a mirror the import statement does not use)
_MANAGER_OBJ, _ROOT_LOGGER = _logging.Logger.manager, _logging.root
_SYS_MODULES, _SYS_NS = sys.modules, sys.__dict__


# builtins the front end never calls in a capture child: a train file may wrap them
# (``builtins.print = functools.partial(print, flush=True)``: R61d-3, a false refusal)
_NOT_CALLED = frozenset({"_", "print", "input", "help", "breakpoint", "exit", "quit",
                         "copyright", "credits", "license"})


def replaced_builtins() -> list[str]:
    """The builtins replaced or removed since this module was imported (names, in order; not
    :data:`_NOT_CALLED`), and ``"sys.modules"`` when ``sys.modules`` is no longer the dict the
    interpreter imports into (R61d-5: rebound to a mirror, a module kept out of it)."""
    out: list[str] = []
    for k, v in _BUILTINS_AT_IMPORT:
        if _NS_GET(_BUILTIN_NS, k, _MISSING) is not v and k not in _NOT_CALLED:
            out.append(k)
    if _NS_GET(_SYS_NS, "modules") is not _SYS_MODULES:
        out.append("sys.modules")
    return out


def _logger_links(v: Any) -> str:
    """What of a logger's skipped attributes is not a cache: its parent by name (a record
    reaches the parent's handlers), and its level cache or links when they hold anything but
    what logging puts there (a flag named ``_cache``: lead's review of round 13)."""
    d = getattr(v, "__dict__", {}) or {}
    parent = d.get("parent")
    out = f",parent={getattr(parent, 'name', None)!r}" if "parent" in d else ""
    cache = d.get("_cache")
    if cache is not None and not (issubclass(type(cache), dict) and all(
            type(k) is int and type(x) is bool for k, x in cache.items())):
        out += f",_cache=<{type(cache).__qualname__} not a level cache>"
    for k in ("manager", "root", "loggerDict"):
        x = d.get(k)
        if x is not None and not (_type_module(type(x)) == "logging"
                                  or (k == "loggerDict" and type(x) is dict)):
            out += f",{k}=<{type(x).__qualname__}>"
    return out


def _is_torch_module(modname: str) -> bool:
    return issubclass(type(modname), str) and (modname == "torch" or modname.startswith("torch."))


def _is_torch(modname: str) -> bool:
    """torch's modules and the few of the standard library's and numpy's whose classes are
    read by name: each package itself or a submodule of it (a dot after its name: a module
    ``numpy_helper`` is not numpy's, R58c-4)."""
    return type(modname) is str and any(modname == p or modname.startswith(p + ".")
                                        for p in _TRUSTED_PACKAGES)


_TRUSTED_PACKAGES = ("torch", "builtins", "collections", "typing", "functools", "numpy")


# the prefix of a torch module's entry: every loaded ``torch.*`` module's globals are read
# (adversarial findings R8-2, R9-2: ``nn.functional.silu = ...``, ``nn.Linear.forward = ...``,
# ``torch.nn.modules.linear.F = ...``)
TORCH_MODULE = "torch namespace "
OTHER_MODULE = "the module "
# the prefix of one of torch's own pending finalizers (process_state._finalizers)
TORCH_FINALIZER = "torch's finalizer "


def _process_state(user: Iterable[str] = (), files: Iterable[str] = (),
                   modules: Iterable[str] | None = None,
                   user_ids: frozenset[int] | None = None) -> dict[str, str]:
    """The process-wide state a step could leave (R8-2): the environment, ``builtins``,
    numpy's global generator, :func:`_c_state`, the globals of every loaded ``torch.*`` module
    (R9-2; by what each names: a function by its module, name and code, a class defined there
    by its code attributes, another object by its type; numbers and strings skipped, as torch
    keeps process-specific counters there; ``UNCOMPARABLE`` when one holds the user's code) and
    of every other module but the user's (R10-1; numbers and strings by value).
    ``user``: the names of the user's modules, ``files``: their source files (a function whose
    code comes from one is the user's whatever its ``__module__`` says: ``functools.wraps``
    copies torch's, R13-1). ``modules``: the loaded modules whose globals are read, by name
    (None, what ``prove --torch`` passes: every one; the unit tests of one module's reading
    name that module, the suite's time). ``user_ids``: the ids of the user's module objects
    (another module under a user module's name is read as any other: R65b-1; None: by name).
    ``torch.ops`` and ``torch.classes`` by their data (``op_namespaces``). Python's ``random``
    generator is not read: torch's distributed calls draw from it in the parallel step (a
    stated assumption)."""
    collecting = gc.isenabled()     # (read as a setting; off while reading: no finalizer
    gc.disable()                    # runs in a fingerprint, and half its time went to gc)
    try:
        with one_fingerprint():
            return _read_process_state(user, files, collecting,
                                       None if modules is None else frozenset(modules),
                                       user_ids)
    finally:
        if collecting:
            gc.enable()


def _read_process_state(user: Iterable[str], files: Iterable[str], collecting: bool,
                        selected: frozenset[str] | None, user_ids: frozenset[int] | None
                        ) -> dict[str, str]:
    import builtins  # noqa: PLC0415

    who = _User(user, (os.path.realpath(f) for f in files))
    # one fingerprint reads an object many modules hold once (by identity: nothing runs
    # between two reads, and each memo entry holds its object, so no address is reused)
    texts: dict[int, tuple[Any, str | None]] = {}
    users: dict[int, tuple[Any, bool]] = {}

    # a function a module holds, with globals of its own, is read with them (R65c-1)
    private = PrivateGlobals(_global_text, TOO_DEEP)

    def global_text(k: Any, v: Any) -> str | None:
        if type(k) is str and k in MODULE_DUNDERS:   # (a function there too: R65e-2)
            t = _global_text(k, v)
            return t if t is None else t + private.text(v)
        hit = texts.get(id(v))
        if hit is None:
            t = _global_text(k, v)
            hit = texts[id(v)] = (v, t if t is None else t + private.text(v))
        return hit[1]

    def from_user(v: Any) -> bool:
        hit = users.get(id(v))
        if hit is None:
            hit = users[id(v)] = (v, _from_user(v, who))
        return hit[1]

    replaced = replaced_builtins()
    env = own_dict(_ENVIRON_OBJ)        # its ``_data`` (R61b-3: ``os._Environ.items`` replaced)
    env = _NS_GET(env, "_data") if type(env) is dict else None  # (no subclass's get: R61c-2)
    out = {"the environment (os.environ)": _digest(repr(sorted(_DICT_ITEMS(env))))
           if type(env) is dict else UNREADABLE + "os.environ's data was replaced",
           "builtins": UNREADABLE + "builtins replaced since before the train file ran (" + (
               ", ".join(replaced[:5])) + "): prove --torch's own reading of the state calls "
           "them; leave Python's builtins as they are" if replaced else
           _digest(repr(sorted((k, _ident(v)) for k, v in vars(builtins).items()
                               if k != "_")))}
    if _NP_READERS is not None:
        out["numpy's global random generator"] = _digest(repr(_NP_READERS[2]()))
    out.update(_c_state(collecting))
    # exit callbacks (called by ``atexit.unregister``'s ``==`` in a step: R58f-4), the codec
    # registry (a cached CodecInfo: R58f-3) and audit hooks, kept in C (c_registries)
    out.update({k: _unreadable_if_deep(t) for k, t in registry_texts(from_user).items()})
    out.update({k: _unreadable_if_deep(t) for k, t in c_settings().items()})    # (R59a-1, -3)
    # by their names' texts (a key that is no str, a tuple put in by hand, neither breaks the
    # sort nor runs its own code: R58e-4)
    loaded = [(name, mod) for name, mod in sorted(
        ((key_text(n), m) for n, m in list(dict.items(sys.modules))), key=lambda kv: kv[0])
        if selected is None or name in selected]
    copies = file_copies(loaded)      # (entries no import exempts: R65d-3)
    for name, mod in loaded:
        if not _is_torch_module(name) or not issubclass(type(mod), types.ModuleType) \
                or lazy_name(name):      # (torch's own: below; any other: as another module)
            continue
        entries = []
        user_code = False
        for kt, k, v in sorted(((key_text(k), k, v) for k, v in list(module_dict(mod).items())),
                               key=lambda kv: kv[0]):
            if issubclass(type(v), types.ModuleType) and type(k) is str \
                    and sys.modules.get(f"{name}.{k}") is v:     # (a str key only: R56e-1)
                continue      # a submodule, set by its import (torch imports lazily, per side)
            if v is None or issubclass(type(v), _DATA) or _lazy_cache(name, k, v):
                continue      # counters, flags, keys and ids of this process (module docstring)
            entries.append((kt, _ident(v) + private.text(v)))      # (R65d-2)
            if from_user(v):
                user_code = True    # what it does when called is not in its text (R11-7, R12-3)
            # a class by its behaviour (functions, descriptors, nested classes), once: in the
            # module that defines it; its data attributes are counters and caches
            # (``RemovableHandle.next_id`` counts every hook ever registered)
            if issubclass(type(v), type) and getattr(v, "__module__", None) == name:
                code = [(a, x) for a, x in list(vars(v).items()) if _behaviour(x)]
                entries.append((kt, tuple(sorted((key_text(a), _ident(x)) for a, x in code))))
                if any(from_user(x) for _, x in code):
                    user_code = True    # ``nn.Linear.forward = <the user's function>`` (R13-2)
        out[(FILE_COPY if name in copies else TORCH_MODULE) + name] = (
            UNCOMPARABLE if user_code else "") + digest_texts(entries)
    # every other module (the standard library's, other packages'): its globals by what they
    # name, numbers and strings by value (``math.scale = 0.5``: R10-1); the user's modules
    # are read in full above
    for name, mod in loaded:
        if (_is_torch_module(name) and not lazy_name(name)) or torch_namespace(name, mod) \
                or (name in who.modules and (user_ids is None or id(mod) in user_ids)) \
                or not issubclass(type(mod), types.ModuleType):
            continue
        try:
            items = sorted(((key_text(k), k, v) for k, v in list(module_dict(mod).items())),
                           key=lambda kv: kv[0])     # any key, by its text (R56d-1)
        except TypeError:           # a module whose namespace is not a dict
            continue
        out[(FILE_COPY if name in copies else OTHER_MODULE) + name] = _unreadable_if_deep([
            (kt, t) for kt, k, v in items                               # (R55e-1, R56a-1)
            if not _lazy_cache(name, k, v)
            and not (issubclass(type(v), types.ModuleType) and type(k) is str    # (R56e-1, R56e-2)
                     and sys.modules.get(f"{name}.{k}") is v)
            and (t := global_text(k, v)) is not None], digest_texts)
    if selected is None or set(LAZY_NAMES) & selected:
        data, out[NAMESPACE_FILLS] = namespace_data(global_text, key_text)   # (R66a-3)
        out[NAMESPACE_DATA] = _digest(data)
    out.update(registry_state())    # ABC registries, sys.modules entries made by hand (R40b)
    methods = list(vars(torch.Tensor).items())
    out["torch.Tensor's methods"] = (
        UNCOMPARABLE if any(_from_user(x, who) for _, x in methods) else "") + _digest(repr(
            sorted((a, _ident(x)) for a, x in methods)))
    return out


class _User:
    """The user's code (module names, real source file paths) and, per fingerprint, which
    classes hold a function of it (a class does not change while one fingerprint is read)."""

    def __init__(self, modules: Iterable[str], files: Iterable[str]) -> None:
        self.modules = frozenset(modules)
        self.files = frozenset(files)
        # (a train file named on the command line relative to the working directory compiles
        # its functions under that relative name: matched by base name, then by real path)
        self.suffixes = tuple(sorted({os.path.basename(f) for f in self.files}))
        self.classes: dict[type, bool] = {}

    def has_file(self, filename: str) -> bool:
        """``filename`` (a code object's) is one of the user's files (``realpath`` only for a
        name one of them has: it costs a system call, and torch has ~20,000 functions)."""
        if filename in self.files:
            return True
        return (bool(self.suffixes) and filename.endswith(self.suffixes)
                and os.path.realpath(filename) in self.files)

    def owns_class(self, cls: type) -> bool:
        """A function of ``cls``'s own namespace is the user's code."""
        hit = self.classes.get(cls)
        if hit is None:
            hit = self.classes[cls] = any(
                issubclass(type(x), types.FunctionType) and self.has_file(x.__code__.co_filename)
                for x in list(vars(cls).values()))
        return hit


def _behaviour(v: Any) -> bool:
    """A class attribute that is code (a function, a descriptor, a class), not data."""
    return issubclass(type(v), (types.FunctionType, types.BuiltinFunctionType, staticmethod,
                          classmethod, property, type, types.MethodDescriptorType,
                          types.WrapperDescriptorType, types.GetSetDescriptorType,
                          types.MemberDescriptorType, functools.partialmethod)) \
        or (callable(v) and not issubclass(type(v), (int, float, str, bytes, tuple, list, dict, set,
                                                frozenset)))


def _from_user(v: Any, who: _User, depth: int = 0) -> bool:
    """``v`` is, wraps or is an instance of code of the user's modules: a function (by its
    ``__module__`` or its code's file: ``functools.wraps`` copies the module of the function
    it wraps, R13-1), a class (or one of its functions), an instance of one, a ``partial``, a
    bound method, a ``property`` / ``staticmethod`` / ``classmethod`` of one (R11-7, R12-3).
    Reads no attribute through ``__getattr__`` (``ctypes.cdll.func`` would load a library)."""
    if depth > 3 or issubclass(type(v), _NO_CODE):
        return False
    if type(v) is types.FunctionType:
        if _name(v.__module__) in who.modules or _name(v.__module__) == "__main__" \
                or who.has_file(v.__code__.co_filename):
            return True
        if getattr(v, "__dynamo_disable", None) is not None and not _dynamo_cache(v):
            # what torch's ``_disable_dynamo`` wrapper calls instead of the function, when
            # it is not torch's own form (``_dynamo_cache``): read as the user's, so a step
            # that changes it is refused (a compiling ``DisableContext``: R39a-3; a partial
            # or closure scaling the output: R40a-1). (Reading every torch function's
            # ``__dict__`` into the digest instead cost the 8B TP8 capture 15 CPU s, 70 MB.)
            return True
        own = v.__dict__     # (a dict subclass's own methods never run: R57a-1)
        w = dict.get(own, "__wrapped__") if issubclass(type(own), dict) else None
        # a wrapper compiled from a string (``exec``) under a copied name: nobody's file
        return w is not None and w is not v and (v.__code__.co_filename.startswith("<")
                                                 or _from_user(w, who, depth + 1))
    if issubclass(type(v), type):
        if _type_module(v) in who.modules or _type_module(v) == "__main__" \
                or who.owns_class(v):
            return True
        w = vars(v).get("__wrapped__")
        return w is not None and w is not v and _from_user(w, who, depth + 1)
    if issubclass(type(v), functools.partial):
        inner = [v.func, *v.args, *v.keywords.values()]
    elif issubclass(type(v), types.MethodType):
        inner = [v.__func__, v.__self__]
    elif issubclass(type(v), property):
        inner = [v.fget, v.fset, v.fdel]
    elif issubclass(type(v), (staticmethod, classmethod)):
        inner = [v.__func__]
    else:                    # an instance: of a class whose code is the user's?
        inner = [type(v)]
    return any(x is not None and x is not v and _from_user(x, who, depth + 1) for x in inner)


# the interpreter's own list of gc callbacks and weakref.finalize's class and record class, as
# they are before the train file runs (rebinding ``gc.callbacks`` or the registry does not
# change what the interpreter and weakref call: R58e-2)
_GC_CALLBACKS = gc.callbacks
_FINALIZE = weakref.finalize
_FINALIZE_INFO = weakref.finalize._Info  # noqa: SLF001
_FINALIZE_REGISTRY = vars(weakref.finalize)["_registry"]


def _unreadable_if_deep(texts: Any, digest: Any = None) -> str:
    """``digest(texts)`` (``texts``: (key text, value text) pairs), or ``texts`` itself (a
    str), UNREADABLE when a value text holds :data:`value_text.TOO_DEEP` (a value held too
    deep, past the budget, or unreadable: R58h-2), as it is or escaped by a ``repr`` the
    entry went through (R59e-1)."""
    if type(texts) is str:      # (an entry made with repr: the handlers, the callbacks)
        deep = TOO_DEEP in texts or _TOO_DEEP_CORE in texts
    else:                       # (a module's globals, each text as made: its own constants
        deep = TOO_DEEP in "".join([t for _, t in texts])   # hold the core escaped)
    text = texts if digest is None else digest(texts)
    return UNREADABLE + "a value it holds could not be read (nested too deep, over the " \
        "budget, or C data)" + text if deep else text


# TOO_DEEP's text between its NULs: found whatever escaping a repr gave them
_TOO_DEEP_CORE = TOO_DEEP.strip("\x00")


def _library_finalizer(func: Any, obj: Any, args: tuple, kwargs: int) -> bool:
    """The finalizer ``torch.library.Library.__init__`` registers, exactly: torch's
    ``_del_library`` (by identity) on a ``Library`` with the arguments it passes (torch's
    module tables and the library's own attributes, each by identity), no keywords
    (``kwargs``: how many), names only in its tables and torch's handles (R58h-1). Nothing
    else is torch's own: a torch function moved to new objects each step (R58g-1) or a
    function made from torch's code with the user's defaults (R58g-3) is the user's."""
    lib, fx = sys.modules.get("torch.library"), sys.modules.get("torch.fx.operator_schemas")
    if lib is None or fx is None or func is not _DEL_LIBRARY or type(obj) is not _LIBRARY \
            or kwargs or type(args) is not tuple or tuple.__len__(args) != 7:
        return False
    own, g = own_dict(obj), module_dict(lib)
    if own is None:
        return False
    want = (g.get("_impls"), dict.get(own, "_op_impls"), g.get("_defs"),
            dict.get(own, "_op_defs"), dict.get(own, "_registration_handles"),
            dict.get(own, "m"), module_dict(fx).get("_SCHEMA_TO_SIGNATURE_CACHE"))
    # the library's tables hold names only, its handles are torch's (a library kept alive
    # through its own table, the count of them a counter: R58h-1)
    return all(a is w and w is not None for a, w in zip(args, want)) \
        and type(args[1]) is set and type(args[3]) is set and type(args[4]) is list \
        and all(type(x) is str for x in set.__iter__(args[1])) \
        and all(type(x) is str for x in set.__iter__(args[3])) \
        and all(type(h) is _HANDLE for h in list.__iter__(args[4]))


_DEL_LIBRARY = torch.library._del_library  # noqa: SLF001 -- torch's own, before the train file
_LIBRARY = torch.library.Library
_HANDLE = torch._library.utils.RegistrationHandle  # noqa: SLF001


def _finalizers() -> tuple[str, dict[str, str]]:
    """Every finalizer pending in ``weakref.finalize``'s registry, read through the registry
    dict and the record class's own descriptors: the user's in one entry, each with its
    function's parts, its object's identity and its arguments (R12-4, R58d-3, R58g-1,
    R58g-3); torch's own (an operator library's, as torch's lazy imports in the step register
    them, F11-1; exactly that shape, :func:`_library_finalizer`) one entry per library,
    :data:`TORCH_FINALIZER` + its identity, arguments included (R58f-1): those of a library
    the step makes, or of one that dies in it, are no change; those of a library alive before
    and after are compared (``step_state.state_changes``). Unreadable when the registry was
    replaced or holds anything but ``weakref.finalize`` objects and their records (a subclass
    with its own registry or record class: R58e-1, R58e-5)."""
    registry = vars(_FINALIZE).get("_registry")
    if registry is not _FINALIZE_REGISTRY or type(registry) is not dict:
        return UNREADABLE + "weakref.finalize's registry was replaced", {}
    mine, torch_own = [], {}
    for f, info in list(dict.items(registry)):
        if type(f) is not _FINALIZE or type(info) is not _FINALIZE_INFO:
            return UNREADABLE + f"a {_qual(type(f))} finalizer", {}
        ref, func, args, kwargs = (vars(_FINALIZE_INFO)[a].__get__(info) for a in (
            "weakref", "func", "args", "kwargs"))
        obj = ref() if type(ref) is weakref.ReferenceType else ref
        if type(args) is not tuple or (kwargs is not None and type(kwargs) is not dict):
            return UNREADABLE + f"a finalizer of {_ident(func)} with odd arguments", {}
        kwargs = {} if kwargs is None else kwargs
        own = _library_finalizer(func, obj, args, dict.__len__(kwargs))
        if own:
            texts = [_global_text("arg", a) for a in args]
            texts += [f"{key_text(k)}={_global_text('arg', a)}" for k, a in _items(kwargs)]
            torch_own.setdefault(TORCH_FINALIZER + identity_text(obj), []).append(
                f"{_ident(func)}:{texts}")
        else:   # the function with its parts (defaults: R58g-3), the object by identity, all
            #     they hold (value_text.deep_text: R59b-1)
            texts = [deep_text(a) for a in args]
            texts += [f"{key_text(k)}={deep_text(a)}" for k, a in _items(kwargs)]
            mine.append(f"{_ident(func)}:{deep_text(func)}@{identity_text(obj)}:"
                        f"{texts}")     # (a finalizer moved to another object: R58g-1)
    return ",".join(sorted(mine)), {k: ",".join(sorted(v)) for k, v in torch_own.items()}


def _c_state(collecting: bool) -> dict[str, str]:
    """Process state kept in C that a step can leave entered or set (R10-1, R10-5, R10-6):
    torch's saved-tensor hooks, its torch-function and dispatch mode stacks and the context
    variables (:func:`torch_c_state.torch_c_texts`, each unreadable part marked there), the
    ``decimal`` context (R63b-1: and which), the finalizers pending (not torch's own), the
    Python threads running (by class and target: a thread the step starts and leaves running
    can change state after the step) and the interpreter's and torch's settings (gc thresholds,
    recursion limit, switch interval, trace and profile functions, thread counts,
    determinism, matmul precision: R12-5)."""
    out = torch_c_texts()
    c = _GETCONTEXT()    # its settings and sticky flags (a step can test one: R60b-3)
    out["the decimal context"] = repr((     # (and which: R63b-1, a copy swapped in)
        identity_text(c), c.prec, c.rounding, c.Emin, c.Emax, c.capitals, c.clamp,
        sorted(k.__name__ for k, on in c.traps.items() if on),
        sorted(k.__name__ for k, on in c.flags.items() if on))) \
        if type(c) is _CONTEXT else UNREADABLE + "a decimal context of a subclass"
    # callbacks that run after the step returns: finalizers of objects still alive (those of
    # garbage are run first, by :func:`step_state`'s collection; R10-5)
    # (torch's own finalizers are not: a torch function on a torch object, as the operator
    # libraries torch imports lazily in the step register, F11-1; a torch function on any
    # other object is, R12-4)
    out["finalizers pending"], torch_own = _finalizers()
    out.update(torch_own)
    out["finalizers pending"] = _unreadable_if_deep(out["finalizers pending"])
    # a gc callback runs at every collection, the fingerprint's own too, with whatever its
    # closure keeps (R58e-3: one rebuilt garbage holding a replaced parameter): unreadable
    out["gc callbacks"] = "" if not list.__len__(_GC_CALLBACKS) else \
        UNREADABLE + f"{list.__len__(_GC_CALLBACKS)} gc.callbacks"
    # the interpreter's, the OS process's, torch's and numpy's settings a step can leave
    # changed (R12-5, R13-4)
    got = [f() for f in _SETTINGS_READERS]
    got[3:5] = [_ident(got[3]), _ident(got[4])]      # (the trace and profile functions)
    out["interpreter and torch settings"] = repr((*got, collecting, _flushes_denormals()))
    out["the process's working directory, umask and signal handlers"] = repr((
        _GETCWD(), _umask(), [(int(sig), deep_text(_handler(sig)))
                              for sig in sorted(_VALID_SIGNALS())]))
    # (each handler with its parts, a closure cell's content too: R58f-2)
    key = "the process's working directory, umask and signal handlers"
    out[key] = _unreadable_if_deep(out[key])
    # the registry holds loggers and placeholders (which ones fills as torch imports lazily:
    # not read); anything else is the user's (finding R14-4); read from the class's and the
    # manager's own namespaces (R61b-4: a descriptor on ``Logger.manager``)
    reg = _CLASS_NS(_LOGGER).get("manager")
    root_own = own_dict(_ROOT_LOGGER)
    same = reg is _MANAGER_OBJ and type(root_own) is dict and _NS_GET(
        root_own, "manager", reg) is reg and _CLASS_NS(_LOGGER).get("root") is _ROOT_LOGGER
    own = own_dict(reg) if same and type(reg) is _MANAGER else None
    own = own if type(own) is dict else None      # (a dict subclass's get: R61c-1)
    loggers = _NS_GET(own, "loggerDict") if own is not None else None
    out["logging's registry and disable level"] = repr((
        _NS_GET(own, "_disable"), sorted(f"{n}:{_qual(type(y))}" for n, y in list(
            _DICT_ITEMS(loggers)) if not issubclass(type(y), (_LOGGER, _PLACEHOLDER))))) \
        if type(loggers) is dict else UNREADABLE + "logging's manager was replaced"
    if _NP_READERS is not None:
        err, printing, _ = _NP_READERS
        e, pr = err(), printing()
        pr = plain_text(pr)     # (a formatter function unreadable, not by repr: R62d-2)
        # (R63a-2: the buffer size and the error callback too, now that numpy's context
        # variable holding them is left to this entry; the callback with its parts)
        out["numpy's error and print settings"] = _unreadable_if_deep(repr((
            sorted((k, v) for k, v in _DICT_ITEMS(e) if k != "call"), pr,
            deep_text(_NS_GET(e, "call"))))) if type(e) is dict and pr is not None else \
            UNREADABLE + "numpy's settings are not dicts of plain values"
    out[THREADS] = "|".join(sorted(
        f"{_qual(type(t))}:{_ident(getattr(t, '_target', None))}:{t.daemon}"
        for t in _THREADS_NOW()))
    return out


def _flushes_denormals() -> bool:
    """``torch.set_flush_denormal(True)`` is on (it has no getter; it changes float64
    results: the smallest subnormal times 1 is 0). Computed on a real CPU tensor with the
    dispatch modes off: within the traced step (the capture's fake and proxy modes) the
    product was recorded in the step's graph, four nodes per fingerprint, so a trace whose
    step state is read and one whose is not (``capture``'s ``state``) had other nodes. Every
    function it calls is bound at import, ``TensorBase``'s C methods rather than
    ``torch.Tensor``'s (R61a-4: ``torch.Tensor.mul`` replaced at import answered 1)."""
    with _NO_MODES():
        return _ITEM(_MUL(_TENSOR([5e-324], dtype=_FLOAT64), 1.0)) == 0.0


def _umask() -> int:
    old = _UMASK(0o022)      # the only way to read it: set and put back
    _UMASK(old)
    return old


def _handler(sig: Any) -> Any:
    try:
        return _GETSIGNAL(sig)      # (the C function: a Python handler, or SIG_DFL / SIG_IGN
    except (ValueError, OSError):   # as their ints)
        return None


# the trace's fake mode and its converters, read in full but for these (the tables of the
# tensors they converted and the counts of conversions, which the step's conversions change:
# R55b-1; measured on mlp_ddp.py, nothing else of them changes in a step)
_TRACER_STATE = {"torch._subclasses.fake_tensor.FakeTensorMode": frozenset(),
                 "torch._subclasses.fake_tensor.FakeTensorConverter": frozenset(
                     {"constant_storage_mapping"}),
                 "torch._subclasses.meta_utils.MetaConverter": frozenset(
                     {"storage_memo", "tensor_memo", "describer", "hit", "miss", "arg_cnt"})}
