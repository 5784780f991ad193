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

import functools
import gc
import hashlib
import math
import os
import signal
import struct
import sys
import threading
import types
import weakref
from collections.abc import Iterable
from typing import Any

import torch

from spec_lang.torch_frontend.lazy_globals import _lazy_cache
from spec_lang.torch_frontend.registry_state import registry_state

__all__ = ["TORCH_MODULE", "OTHER_MODULE", "THREADS", "UNCOMPARABLE", "UNREADABLE",
           "dunder_text", "identity_text", "key_text", "object_text", "own_dict", "prim_repr",
           "release_kept"]

THREADS = "the Python threads running"

UNCOMPARABLE = "~"          # prefix of a value whose new content cannot be compared
# prefix of a value prove --torch cannot read (no attributes, over the budget): whether the
# step changed it is not known, so it is reported whether or not its text changed (R8-1)
UNREADABLE = UNCOMPARABLE + "!"


# a logger's caches and links to the process's logger tree (F11-2)
_LOGGER_CACHES = frozenset({"_cache", "manager", "parent", "loggerDict", "root"})


def _logger_links(v: Any) -> str:
    """What of a logger's skipped attributes is not a cache: its parent by name (a record
    reaches the parent's handlers), and its level cache or links when they hold anything but
    what logging puts there (a flag named ``_cache``: lead's review of round 13)."""
    d = getattr(v, "__dict__", {}) or {}
    parent = d.get("parent")
    out = f",parent={getattr(parent, 'name', None)!r}" if "parent" in d else ""
    cache = d.get("_cache")
    if cache is not None and not (isinstance(cache, dict) and all(
            type(k) is int and type(x) is bool for k, x in cache.items())):
        out += f",_cache=<{type(cache).__qualname__} not a level cache>"
    for k in ("manager", "root", "loggerDict"):
        x = d.get(k)
        if x is not None and not (type(x).__module__ == "logging"
                                  or (k == "loggerDict" and type(x) is dict)):
            out += f",{k}=<{type(x).__qualname__}>"
    return out


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:16]  # noqa: S324 -- a digest


def _qual(t: type) -> str:
    return f"{t.__module__}.{t.__qualname__}"


def _is_torch_module(modname: str) -> bool:
    return isinstance(modname, str) and (modname == "torch" or modname.startswith("torch."))


def _is_torch(modname: str) -> bool:
    return isinstance(modname, str) and (modname == "torch" or modname.startswith(
        ("torch.", "builtins", "collections", "typing", "functools", "numpy")))


# the prefix of a torch module's entry: every loaded ``torch.*`` module's globals are read
# (adversarial findings R8-2, R9-2: ``nn.functional.silu = ...``, ``nn.Linear.forward = ...``,
# ``torch.nn.modules.linear.F = ...``)
TORCH_MODULE = "torch namespace "
OTHER_MODULE = "the module "
# namespaces torch fills on first use (``torch.ops._c10d_functional`` when the parallel step
# first calls a functional collective): caches of the dispatcher's operators, not code a train
# file patches to change what ``nn`` or ``optim`` compute
_LAZY_NAMESPACES = ("torch.ops", "torch.classes")
# a torch module's data globals: process-specific (``distributed_c10d._group_count``, a
# composable API's uuid ``STATE_KEY``, function addresses in ``torch._C._dynamo.guards``)
_DATA = (bool, int, float, complex, str, bytes)


# what the import system and the warnings module put in a module's namespace: read by
# :func:`dunder_text` (R56a-1: ``math.__doc__`` grown by one character per step was unseen);
# any other ``__x__`` global of a module is read as any global (R55e-1: ``math.__r55e__``)
MODULE_DUNDERS = frozenset({"__name__", "__doc__", "__package__", "__loader__", "__spec__",
                            "__path__", "__file__", "__cached__", "__builtins__",
                            "__warningregistry__"})


def dunder_text(k: str, v: Any) -> str | None:
    """A module's import-system entry ``k`` (one of :data:`MODULE_DUNDERS`): a string, number,
    bytes or None by value (:func:`_data_text`; a subclass of one by :func:`object_text`,
    R56c-1); ``__warningregistry__`` not at all while it has the shape ``warnings`` gives it
    (``"version"`` -> int, ``(text, category, lineno)`` -> True: a warning the step shows the
    first time adds to it; a counter kept there in that shape is not seen: R56b-1, open),
    else by identity; anything else by identity (R56a-1), kept alive until compared
    (:func:`identity_text`). Identities are compared before and after the step in one process
    only. Nothing of the value's own code runs."""
    if k == "__warningregistry__" and type(v) is dict and all(
            (type(x) is str and x == "version" and type(y) is int)
            or (type(x) is tuple and len(x) == 3 and type(x[0]) is str
                and issubclass(type(x[1]), type) and type(x[2]) is int and y is True)
            for x, y in v.items()):
        return None
    if v is None or type(v) in _DATA:
        return _data_text(v)
    if issubclass(type(v), _DATA):     # its own attributes too (R56c-1)
        return object_text(v)
    return identity_text(v)


# what an identity in a fingerprint names, alive until the fingerprints are compared
# (``step_state.state_changes`` releases them): an object made at a freed one's address is not
# taken for it (R56b-2: ``json._default_encoder`` dropped and a new one made until one lands at
# its address). An object only this list holds after the step was dropped by the step, and
# its entry has changed already (another identity, or no entry): its finalizer, run when the
# list is released, changes no verdict.
_KEPT: list[Any] = []


def identity_text(v: Any) -> str:
    """``v``'s type and identity, ``v`` kept alive until :func:`release_kept`."""
    _KEPT.append(v)
    return f"{_qual(type(v))}@{id(v)}"


def release_kept() -> None:
    """Drop what :func:`identity_text` keeps (after the fingerprints are compared)."""
    _KEPT.clear()


def _data_text(v: Any) -> str:
    """None, a number, a string or bytes by value, read by its base type's C ``__repr__``
    (a subclass's own ``__repr__`` is never called: R56b-3), bytes over 64 by a digest."""
    if v is None:
        return "NoneType:None"
    base = next(b for b in _DATA if issubclass(type(v), b))
    sub = "" if type(v) is base else f"({_qual(type(v))})"
    if base is bytes and len(v) > 64:
        return f"bytes{sub}:{len(v)}:{hashlib.sha1(bytes(v)).hexdigest()}"  # noqa: S324
    if base is int and int.bit_length(v) > 256:   # (repr raises past 4300 digits: R56c-3)
        hx = int.__format__(v, "x").encode()
        return f"int{sub}:{len(hx)}:{hashlib.sha1(hx).hexdigest()}"  # noqa: S324
    return f"{base.__name__}{sub}:{prim_repr(base, v)}"


def key_text(k: Any) -> str:
    """A namespace key: a ``str`` as it is, anything else by :func:`object_text` (a str
    subclass's own ``__repr__`` or ``__format__`` is never called: R56d-1, R56d-2)."""
    return k if type(k) is str else f"<key {object_text(k)}>"


def prim_repr(base: type, v: Any) -> str:
    """``base.__repr__(v)`` for a primitive ``v`` (``base`` one of :data:`_DATA`), a NaN with
    its bits (``repr`` says ``nan`` for every payload: R56d-5)."""
    if base is float and math.isnan(v):
        return f"nan:{struct.pack('<d', v).hex()}"
    if base is complex:
        re, im = complex.real.__get__(v), complex.imag.__get__(v)
        if math.isnan(re) or math.isnan(im):
            return f"complex:{struct.pack('<dd', re, im).hex()}"
    return base.__repr__(v)


def _global_text(k: str, v: Any) -> str | None:
    """Another module's global ``k``: :func:`dunder_text` for the import system's entries;
    None, a number, a string or bytes by value; a C function or a loaded module by its name
    (the module is read as its own entry); anything else by :func:`object_text`: a plain
    object (R56a-3: ``json._default_encoder`` replaced by another ``JSONEncoder(indent=n)``),
    a data subclass (R56c-1), a function, a class or a module not in ``sys.modules``
    (R56c-2: a closure over another value, a new ``ModuleType``). What such an object holds,
    changed in place, is not read (docs/torch.md, "Where the fingerprint stops")."""
    if type(k) is str and k in MODULE_DUNDERS:
        return dunder_text(k, v)
    t = type(v)
    if v is None or t in _DATA:
        return _data_text(v)
    if issubclass(t, (types.BuiltinMethodType, types.MethodWrapperType)):
        owner = v.__self__     # a C method bound to an object: that object too (R56d-3)
        if owner is not None and type(owner) is not types.ModuleType:   # (and its own
            return f"{_ident(v)}:" + (_data_text(owner) if type(owner) in _DATA   # attributes:
                                      else object_text(owner))                  # R56e-3)
    if (issubclass(t, _NO_CODE) and not issubclass(t, (types.ModuleType, *_DATA))) or (
            t is types.ModuleType and sys.modules.get(vars(v).get("__name__")) is v):
        return _ident(v)
    return object_text(v)


def object_text(v: Any) -> str:
    """What :func:`_ident` says of ``v``, its identity (:func:`identity_text`) and its own
    attributes' :func:`_ident` (a plain module's globals); a Python function by the identities
    of its parts (below). No code of the value's runs."""
    if type(v) is types.FunctionType:
        # by the identities of its parts, kept alive until compared (as fast as the suite's
        # budget needs): its code, name, qualified name, module, doc (R56f-3), defaults,
        # keyword defaults, annotations, dict and closure cells' contents (R56c-2); the dicts'
        # contents too (changed in place), less torch's ``__dynamo_disable`` cache
        own, an, kd = v.__dict__, v.__annotations__, v.__kwdefaults__
        parts = (v, v.__code__, v.__name__, v.__qualname__, v.__module__, v.__doc__,
                 v.__defaults__, kd, an, own, *(_cell(c) for c in v.__closure__ or ()))
        _KEPT.extend(parts)
        text = "fn@" + ",".join([str(id(x)) for x in parts])
        for tag, dct in (("d", own), ("a", an), ("k", kd)):
            if dct:
                skip = _dynamo_cache(v) if tag == "d" else frozenset()
                text += f":{tag}" + repr(sorted(
                    (x if type(x) is str else _qual(type(x)), _ident(y))
                    for x, y in list(dct.items()) if type(x) is not str or x not in skip))
        return text
    text = _ident(v) + identity_text(v)
    if type(v) is types.MethodType:          # a Python method: its function and object (R56e-3)
        return text + f":{object_text(v.__func__)}:{object_text(v.__self__)}"
    own = vars(v) if type(v) is types.ModuleType else own_dict(v)
    if own is None:
        return text
    return text + repr(sorted((x if type(x) is str else _qual(type(x)), _ident(y))
                              for x, y in list(own.items())))


def own_dict(v: Any) -> dict | None:
    """``v.__dict__`` through the C descriptor types give instances; None when a class of
    ``v``'s defines ``__dict__`` otherwise (no code of the value's runs)."""
    for cls in type(v).__mro__:
        d = cls.__dict__.get("__dict__")
        if d is not None:
            if type(d) is not types.GetSetDescriptorType:
                return None
            try:
                out = d.__get__(v, type(v))
            except Exception:  # noqa: BLE001 -- unreadable: the identity says it
                return None
            return out if type(out) is dict else None
    return None


def _process_state(user: Iterable[str] = (), files: Iterable[str] = (),
                   modules: Iterable[str] | None = None) -> dict[str, str]:
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
    name that module, the suite's time). Python's ``random`` generator is not read:
    torch's distributed calls draw from it in the parallel step (a stated assumption)."""
    global _IDENTS  # noqa: PLW0603 -- one fingerprint's memo, dropped when it returns
    collecting = gc.isenabled()     # (read as a setting; off while reading: no finalizer
    gc.disable()                    # runs in a fingerprint, and half its time went to gc)
    _IDENTS = {}
    try:
        return _read_process_state(user, files, collecting,
                                   None if modules is None else frozenset(modules))
    finally:
        _IDENTS = None
        if collecting:
            gc.enable()


def _read_process_state(user: Iterable[str], files: Iterable[str], collecting: bool,
                        selected: frozenset[str] | None) -> dict[str, str]:
    import builtins  # noqa: PLC0415

    who = _User(user, (os.path.realpath(f) for f in files))
    # one fingerprint reads an object many modules hold once (by identity: nothing runs
    # between two reads, and each memo entry holds its object, so no address is reused)
    texts: dict[int, tuple[Any, str | None]] = {}
    users: dict[int, tuple[Any, bool]] = {}

    def global_text(k: Any, v: Any) -> str | None:
        if type(k) is str and k in MODULE_DUNDERS:
            return _global_text(k, v)
        hit = texts.get(id(v))
        if hit is None:
            hit = texts[id(v)] = (v, _global_text(k, v))
        return hit[1]

    def from_user(v: Any) -> bool:
        hit = users.get(id(v))
        if hit is None:
            hit = users[id(v)] = (v, _from_user(v, who))
        return hit[1]

    out = {"the environment (os.environ)": _digest(repr(sorted(os.environ.items()))),
           "builtins": _digest(repr(sorted((k, _ident(v)) for k, v in vars(builtins).items()
                                           if k != "_")))}
    np = sys.modules.get("numpy")
    if np is not None:
        out["numpy's global random generator"] = _digest(repr(np.random.get_state()))
    out.update(_c_state(collecting))
    loaded = [(name, mod) for name, mod in sorted(list(sys.modules.items()), key=lambda kv: kv[0])
              if selected is None or name in selected]
    for name, mod in loaded:
        if not _is_torch_module(name) or not isinstance(mod, types.ModuleType) \
                or name in _LAZY_NAMESPACES or name.startswith(_LAZY_NAMESPACES):
            continue
        entries = []
        user_code = False
        for kt, k, v in sorted(((key_text(k), k, v) for k, v in list(vars(mod).items())),
                               key=lambda kv: kv[0]):
            if isinstance(v, types.ModuleType) and type(k) is str \
                    and sys.modules.get(f"{name}.{k}") is v:     # (a str key only: R56e-1)
                continue      # a submodule, set by its import (torch imports lazily, per side)
            if v is None or isinstance(v, _DATA):
                continue      # counters, flags, keys and ids of this process (module docstring)
            entries.append((kt, _ident(v)))
            if from_user(v):
                user_code = True    # what it does when called is not in its text (R11-7, R12-3)
            # a class by its behaviour (functions, descriptors, nested classes), once: in the
            # module that defines it; its data attributes are counters and caches
            # (``RemovableHandle.next_id`` counts every hook ever registered)
            if isinstance(v, type) and getattr(v, "__module__", None) == name:
                attrs = list(vars(v).items())
                entries.append((k, tuple(sorted((a, _ident(x)) for a, x in attrs
                                                if _behaviour(x)))))
                if any(_behaviour(x) and _from_user(x, who) for _, x in attrs):
                    user_code = True    # ``nn.Linear.forward = <the user's function>`` (R13-2)
        out[TORCH_MODULE + name] = (UNCOMPARABLE if user_code else "") + _digest(repr(entries))
    # every other module (the standard library's, other packages'): its globals by what they
    # name, numbers and strings by value (``math.scale = 0.5``: R10-1); the user's modules
    # are read in full above
    for name, mod in loaded:
        if _is_torch_module(name) or name in who.modules or not isinstance(mod, types.ModuleType):
            continue
        try:
            items = sorted(((key_text(k), k, v) for k, v in list(vars(mod).items())),
                           key=lambda kv: kv[0])     # any key, by its text (R56d-1)
        except TypeError:           # a module whose namespace is not a dict
            continue
        out[OTHER_MODULE + name] = _digest(repr([
            (kt, t) for kt, k, v in items                               # (R55e-1, R56a-1)
            if not _lazy_cache(name, k, v)
            and not (isinstance(v, types.ModuleType) and type(k) is str    # (R56e-1, R56e-2)
                     and sys.modules.get(f"{name}.{k}") is v)
            and (t := global_text(k, v)) is not None]))
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
                isinstance(x, types.FunctionType) and self.has_file(x.__code__.co_filename)
                for x in list(vars(cls).values()))
        return hit


def _behaviour(v: Any) -> bool:
    """A class attribute that is code (a function, a descriptor, a class), not data."""
    return isinstance(v, (types.FunctionType, types.BuiltinFunctionType, staticmethod,
                          classmethod, property, type, types.MethodDescriptorType,
                          types.WrapperDescriptorType, types.GetSetDescriptorType,
                          types.MemberDescriptorType, functools.partialmethod)) \
        or (callable(v) and not isinstance(v, (int, float, str, bytes, tuple, list, dict, set,
                                                frozenset)))


# values that hold no Python code of anyone's: C functions and descriptors, plain data
_NO_CODE = (types.BuiltinFunctionType, types.MethodDescriptorType, types.WrapperDescriptorType,
            types.GetSetDescriptorType, types.MemberDescriptorType,
            types.ClassMethodDescriptorType, types.MethodWrapperType, types.ModuleType,
            bool, int, float, complex, str, bytes, type(None))


def _from_user(v: Any, who: _User, depth: int = 0) -> bool:
    """``v`` is, wraps or is an instance of code of the user's modules: a function (by its
    ``__module__`` or its code's file: ``functools.wraps`` copies the module of the function
    it wraps, R13-1), a class (or one of its functions), an instance of one, a ``partial``, a
    bound method, a ``property`` / ``staticmethod`` / ``classmethod`` of one (R11-7, R12-3).
    Reads no attribute through ``__getattr__`` (``ctypes.cdll.func`` would load a library)."""
    if depth > 3 or isinstance(v, _NO_CODE):
        return False
    if type(v) is types.FunctionType:
        if v.__module__ in who.modules or v.__module__ == "__main__" \
                or who.has_file(v.__code__.co_filename):
            return True
        if getattr(v, "__dynamo_disable", None) is not None and not _dynamo_cache(v):
            # what torch's ``_disable_dynamo`` wrapper calls instead of the function, when
            # it is not torch's own form (``_dynamo_cache``): read as the user's, so a step
            # that changes it is refused (a compiling ``DisableContext``: R39a-3; a partial
            # or closure scaling the output: R40a-1). (Reading every torch function's
            # ``__dict__`` into the digest instead cost the 8B TP8 capture 15 CPU s, 70 MB.)
            return True
        w = v.__dict__.get("__wrapped__") if v.__dict__ else None
        # a wrapper compiled from a string (``exec``) under a copied name: nobody's file
        return w is not None and w is not v and (v.__code__.co_filename.startswith("<")
                                                 or _from_user(w, who, depth + 1))
    if isinstance(v, type):
        if v.__module__ in who.modules or v.__module__ == "__main__" or who.owns_class(v):
            return True
        w = vars(v).get("__wrapped__")
        return w is not None and w is not v and _from_user(w, who, depth + 1)
    if isinstance(v, functools.partial):
        inner = [v.func, *v.args, *v.keywords.values()]
    elif isinstance(v, types.MethodType):
        inner = [v.__func__, v.__self__]
    elif isinstance(v, property):
        inner = [v.fget, v.fset, v.fdel]
    elif isinstance(v, (staticmethod, classmethod)):
        inner = [v.__func__]
    else:                    # an instance: of a class whose code is the user's?
        inner = [type(v)]
    return any(x is not None and x is not v and _from_user(x, who, depth + 1) for x in inner)


def _c_state(collecting: bool) -> dict[str, str]:
    """Process state kept in C that a step can leave entered or set (R10-1, R10-5, R10-6):
    torch's saved-tensor hooks, its torch-function and dispatch mode stacks (each mode by its
    class), the ``decimal`` context, the finalizers pending (not torch's own), the Python
    threads running (by class and target: a thread the step starts and leaves running can
    change state after the step) and the interpreter's and torch's settings (gc thresholds,
    recursion limit, switch interval, trace and profile functions, thread counts,
    determinism, matmul precision: R12-5)."""
    from torch.overrides import _get_current_function_mode_stack  # noqa: PLC0415
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack  # noqa: PLC0415

    hooks = torch._C._autograd._top_saved_tensors_default_hooks(True)  # noqa: SLF001
    out = {"torch saved_tensors_hooks": "none" if hooks is None else
           ",".join(_ident(h) + ":" + _function_text(h) for h in hooks),
           "torch function mode stack": ",".join(
               _qual(type(m)) for m in _get_current_function_mode_stack()),
           "torch dispatch mode stack": ",".join(
               _qual(type(m)) for m in _get_current_dispatch_mode_stack())}
    dec = sys.modules.get("decimal")
    if dec is not None:
        c = dec.getcontext()         # its settings (the sticky flags are a log, not a setting)
        out["the decimal context"] = repr((c.prec, c.rounding, c.Emin, c.Emax, c.capitals,
                                           c.clamp, sorted(k.__name__ for k, on in
                                                           c.traps.items() if on)))
    # callbacks that run after the step returns: finalizers of objects still alive (those of
    # garbage are run first, by :func:`step_state`'s collection; R10-5); exit handlers run
    # when the process ends, after the last step, and are not read
    # (torch's own finalizers are not: a torch function on a torch object, as the operator
    # libraries torch imports lazily in the step register, F11-1; a torch function on any
    # other object is, R12-4)
    mine = []
    for f, info in list(weakref.finalize._registry.items()):  # noqa: SLF001
        obj = info.weakref()
        func = getattr(info, "func", None)
        if not (_is_torch_module(getattr(func, "__module__", None) or "")
                and _is_torch_module(type(obj).__module__ or "")):
            mine.append(f"{_ident(func)}@{_qual(type(obj))}:{f.alive}")
    out["finalizers pending"] = ",".join(sorted(mine))
    # the interpreter's, the OS process's, torch's and numpy's settings a step can leave
    # changed (R12-5, R13-4)
    out["interpreter and torch settings"] = repr((
        gc.get_threshold(), collecting, sys.getrecursionlimit(), sys.getswitchinterval(),
        _ident(sys.gettrace()), _ident(sys.getprofile()), torch.get_num_threads(),
        torch.get_num_interop_threads(), torch.are_deterministic_algorithms_enabled(),
        torch.get_float32_matmul_precision(), sys.get_int_max_str_digits(),
        torch.is_warn_always_enabled(), torch.is_anomaly_enabled(),
        torch.is_anomaly_check_nan_enabled(), torch._C._get_mkldnn_enabled(),  # noqa: SLF001
        torch.backends.cudnn.enabled, torch.backends.cudnn.benchmark,
        torch.backends.cudnn.deterministic, _flushes_denormals()))
    out["the process's working directory, umask and signal handlers"] = repr((
        os.getcwd(), _umask(), [(int(sig), _ident(_handler(sig)))
                                for sig in sorted(signal.valid_signals())]))
    lg = sys.modules.get("logging")
    if lg is not None:   # the registry holds loggers and placeholders (which ones fills as
        reg = lg.Logger.manager   # torch imports lazily: not read); anything else is the
        out["logging's registry and disable level"] = repr((   # user's (finding R14-4)
            reg.disable, sorted(f"{n}:{_qual(type(y))}" for n, y in list(reg.loggerDict.items())
                                if not isinstance(y, (lg.Logger, lg.PlaceHolder)))))
    np = sys.modules.get("numpy")
    if np is not None:
        out["numpy's error and print settings"] = repr((sorted(np.geterr().items()),
                                                         sorted(np.get_printoptions().items(),
                                                                key=lambda kv: kv[0])))
    out[THREADS] = "|".join(sorted(
        f"{_qual(type(t))}:{_ident(getattr(t, '_target', None))}:{t.daemon}"
        for t in threading.enumerate()))
    return out


def _flushes_denormals() -> bool:
    """``torch.set_flush_denormal(True)`` is on (it has no getter; it changes float64
    results: the smallest subnormal times 1 is 0)."""
    return float(torch.tensor([5e-324], dtype=torch.float64).mul(1.0)[0]) == 0.0


def _umask() -> int:
    old = os.umask(0o022)      # the only way to read it: set and put back
    os.umask(old)
    return old


def _handler(sig: Any) -> Any:
    try:
        return signal.getsignal(sig)
    except (ValueError, OSError):
        return None


def _function_text(f: Any) -> str:
    code = getattr(f, "__code__", None)
    return _digest(repr(code.co_code)) if code is not None else ""


@functools.lru_cache(maxsize=1 << 16)
def _bytecode_digest(code: bytes) -> str:
    """(cached: ~20,000 of torch's functions are read per fingerprint)"""
    return _digest(repr(code))


# :func:`_ident`'s texts while one :func:`_process_state` runs (by identity: no code runs
# between two reads, and each entry holds its object, so no address is reused); None outside
_IDENTS: dict[int, tuple[Any, str]] | None = None


def _ident(v: Any) -> str:
    """An identity-free name of a namespace entry: what replacing it changes."""
    memo = _IDENTS
    if memo is None:
        return _ident_text(v)
    hit = memo.get(id(v))
    if hit is None:
        hit = memo[id(v)] = (v, _ident_text(v))
    return hit[1]


def _ident_text(v: Any) -> str:
    if isinstance(v, types.FunctionType):
        c = v.__code__
        return f"fn:{v.__module__}.{v.__qualname__}:{c.co_filename}:{c.co_firstlineno}:" \
               f"{_bytecode_digest(c.co_code)}"
    if isinstance(v, types.ModuleType):
        name = vars(v).get("__name__", "")                 # (torch.classes raises on getattr)
        # a stand-in module under a loaded module's name is not that module
        return f"module:{name}" if sys.modules.get(name) is v else f"module:{name}(a copy)"
    if isinstance(v, type):
        return f"class:{v.__module__}.{v.__qualname__}"
    if v is None or issubclass(type(v), _DATA):       # by value (R56b-3)
        return _data_text(v)
    if isinstance(v, (types.BuiltinFunctionType, types.BuiltinMethodType)):
        return f"builtin:{v.__module__}.{v.__qualname__}"
    return f"{type(v).__module__}.{type(v).__qualname__}"   # (torch.classes raises on getattr)


def _dynamo_cache(f: types.FunctionType) -> frozenset[str]:
    """``{"__dynamo_disable"}`` when ``f`` holds torch's own cache there: ``torch._compile.
    _disable_dynamo`` sets it on the function it wraps at the first call, to
    ``torch._dynamo.disable(f)`` (``DisableContext.__call__``'s ``_fn`` closing over ``f``),
    a step that calls ``torch.utils.checkpoint.checkpoint`` for the first time leaves it
    (round 38e, r38e_10). Anything else there is read (the wrapper calls it)."""
    d = f.__dict__.get("__dynamo_disable") if isinstance(f.__dict__, dict) else None
    if type(d) is not types.FunctionType or d.__code__.co_name != "_fn" \
            or d.__globals__.get("__name__") != "torch._dynamo.eval_frame" \
            or not any(_cell(c) is f for c in d.__closure__ or ()):
        return frozenset()
    # what the closure holds besides f: a DisableContext whose callback is None (a
    # DisableContext with another callback compiles f at every call: R39a-3)
    # (the module taken out of sys.modules by the train file: nothing is skipped)
    ctx_type = getattr(sys.modules.get("torch._dynamo.eval_frame"), "DisableContext", None)
    for c in d.__closure__ or ():
        x = _cell(c)
        if x is not f and not (type(x) is ctx_type and x.callback is None):
            return frozenset()
    from spec_lang.torch_frontend.op_guard import current_baseline  # noqa: PLC0415

    own = current_baseline().own_code(types.SimpleNamespace(f_globals=d.__globals__,
                                                            f_code=d.__code__))
    return frozenset({"__dynamo_disable"}) if own else frozenset()


def _cell(c: Any) -> Any:
    try:
        return c.cell_contents
    except ValueError:
        return "<empty cell>"


# the trace's fake mode and its converters, read in full but for these (the tables of the
# tensors they converted and the counts of conversions, which the step's conversions change:
# R55b-1; measured on mlp_ddp.py, nothing else of them changes in a step)
_TRACER_STATE = {"torch._subclasses.fake_tensor.FakeTensorMode": frozenset(),
                 "torch._subclasses.fake_tensor.FakeTensorConverter": frozenset(
                     {"constant_storage_mapping"}),
                 "torch._subclasses.meta_utils.MetaConverter": frozenset(
                     {"storage_memo", "tensor_memo", "describer", "hit", "miss", "arg_cnt"})}
