"""Values whose state is not in Python attributes (a numpy array, a generator, a buffer, a
lock, a weak reference, a C data object): how :mod:`spec_lang.torch_frontend.step_state`'s
encoder reads them (adversarial findings R8-1, R9-1, R10-2, R11-3, R12-2, R55c-3, R57b-1,
R57b-2). Split from ``step_state``.
"""

from __future__ import annotations

import array
import collections
import functools
import gc
import hashlib
import io
import logging
import random
import re
import sys
import threading
import types
import weakref
from typing import Any

import torch

from spec_lang.torch_frontend.process_state import _FINALIZE, _LOGGER_CACHES, _logger_links
from spec_lang.torch_frontend.value_text import (_digest, _items, _qual, _type_module,
                                                 identity_text)

__all__ = ["special_text"]

def _np_types() -> tuple[type, ...]:
    np = sys.modules.get("numpy")
    return () if np is None else (np.ndarray, np.generic, np.random.Generator,
                                  np.random.RandomState)


_LOCKS = (type(threading.Lock()), type(threading.RLock()))


def _ufunc_name(v: Any) -> str | None:
    """The name of one of numpy's own functions implemented in C (exactly a ``numpy.ufunc``,
    ``numpy.sin``, or numpy's array-function dispatcher, ``numpy.triu``; one numpy held before
    the train file ran, :data:`_NP_KNOWN`) that the numpy module its ``__module__`` names
    holds under its ``__name__``, else None (R65e-4: a function
    ``sympy.lambdify`` made, whose namespace holds numpy's functions)."""
    np = sys.modules.get("numpy")
    ns = _MODULE_DICT(np) if type(np) is types.ModuleType else None
    if type(ns) is not dict:
        return None
    if type(v) not in _NP_C_FUNCTIONS or id(v) not in _NP_KNOWN:
        return None
    name, mod = _c_attr(v, "__name__"), _c_attr(v, "__module__") or "numpy"  # (a ufunc: none)
    home = sys.modules.get(mod) if type(mod) is str and mod.split(".")[0] == "numpy" else None
    home_ns = _MODULE_DICT(home) if type(home) is types.ModuleType else None
    return f"{mod}.{name}" if type(name) is str and type(home_ns) is dict \
        and dict.get(home_ns, name) is v else None


_MODULE_DICT = types.ModuleType.__dict__["__dict__"].__get__
try:    # numpy's C function types, bound before the train file runs (torch imports numpy)
    from numpy import ufunc as _UFUNC
    from numpy._core._multiarray_umath import _ArrayFunctionDispatcher as _DISPATCHER
    _NP_C_FUNCTIONS: tuple[type, ...] = (_UFUNC, _DISPATCHER)
except ImportError:         # (another numpy's layout, or none: read as C state)
    _NP_C_FUNCTIONS = ()
# numpy's own such functions, as its loaded modules hold them before the train file runs
# (one the train file makes, ``np.frompyfunc(f, 1, 1)`` or a dispatcher wrapping its own
# function, and binds in numpy under its name is not: its Python function's state is unread)
_NP_KNOWN: dict[int, Any] = {
    id(x): x for m in list(sys.modules.values())
    if type(m) is types.ModuleType and type(name := _MODULE_DICT(m).get("__name__")) is str
    and name.split(".")[0] == "numpy"
    for x in list(_MODULE_DICT(m).values()) if type(x) in _NP_C_FUNCTIONS}


def _c_attr(v: Any, a: str) -> Any:
    """``v.a`` through ``object``'s lookup (the C type's own descriptors), None if absent."""
    try:
        return object.__getattribute__(v, a)
    except AttributeError:
        return None


# functools' C cache wrapper (not subclassable) and logging's own classes, as imported before
# the train file runs (a class of the same name, or one the train file binds in their place,
# is not them: R58b-3)
_LRU = functools._lru_cache_wrapper  # noqa: SLF001
_LOGGING = (logging.Logger, logging.RootLogger, logging.Manager)
_TUPLEGETTER = collections._tuplegetter  # noqa: SLF001 -- a namedtuple's field (not subclassable)


def _lru_probe(x: Any = None) -> Any:
    """The function of the probe wrappers :func:`_lru_layout` reads."""
    return x


# where an ``lru_cache`` wrapper keeps its fields (CPython's ``lru_cache_object``,
# Modules/_functoolsmodule.c): byte offsets, each checked on probe wrappers at import
_LRU_OFFSETS = {"typed": 64, "cache": 72, "hits": 80, "func": 88, "maxsize": 96, "misses": 104,
                "info": 128}


def _lru_fields(v: Any) -> dict[str, int]:
    """The C fields of the ``lru_cache`` wrapper ``v`` (exactly :data:`_LRU`), read from its
    memory: ``typed`` an int, the others a ``Py_ssize_t`` (an address for ``cache``, ``func``
    and ``info``). No code of the wrapper's runs (its ``cache_info`` calls the cache-info type
    it was made with, which may be the user's: R58d-1)."""
    import ctypes  # noqa: PLC0415

    return {k: (ctypes.c_int if k == "typed" else ctypes.c_ssize_t).from_address(id(v) + o).value
            for k, o in _LRU_OFFSETS.items()}


def _lru_layout() -> bool:
    """:data:`_LRU_OFFSETS` hold on this interpreter: two probe wrappers that differ in every
    field read back what they were made with and what ``cache_info`` says (our own probes,
    before the train file runs); False: every lru_cache is unreadable."""
    if _LRU.__basicsize__ != 152:
        return False
    for typed, maxsize, calls in ((False, 7, (1, 1, 2)), (True, 3, (1, 2, 3, 3, 3))):
        w = _LRU(_lru_probe, maxsize, typed, functools._CacheInfo)  # noqa: SLF001
        for c in calls:
            w(c)
        info, f = w.cache_info(), _lru_fields(w)
        cache = [x for x in gc.get_referents(w) if type(x) is dict and len(x) == info.currsize]
        if (f["typed"], f["maxsize"], f["hits"], f["misses"], f["func"], f["info"]) != (
                int(typed), maxsize, info.hits, info.misses, id(_lru_probe),
                id(functools._CacheInfo)) or f["cache"] not in [id(x) for x in cache]:  # noqa
            return False
    return True


_LRU_READABLE = _lru_layout()


def _lru_text(enc: Any, v: Any) -> str:
    """An ``lru_cache`` wrapper by its C fields (:func:`_lru_fields`): the function it calls
    (held in C; its ``__wrapped__`` is only an attribute the user can rebind: R57d-2; a dict
    subclass or a class it calls, R58a-1, R58a-2), ``typed`` (R58d-2), ``maxsize``, the hit
    and miss counts (R57c-1), the cache-info type, and its own attributes; a cache holding
    values is unreadable (``cache_clear`` even resets the statistics: R10-2)."""
    if not _LRU_READABLE:
        enc.uncomparable = enc.unreadable = True
        return "<lru_cache: layout not understood>"
    f = _lru_fields(v)
    held = {id(x): x for x in gc.get_referents(v)}
    func, cache, info = (held.get(f[k], _MISSING) for k in ("func", "cache", "info"))
    if func is _MISSING or info is _MISSING or type(cache) is not dict:
        enc.uncomparable = enc.unreadable = True
        return "<lru_cache not understood>"
    if dict.__len__(cache):
        enc.uncomparable = enc.unreadable = True
        return f"<lru_cache holding {dict.__len__(cache)} values>"
    kind = "CacheInfo" if info is functools._CacheInfo else enc.enc(info)  # noqa: SLF001
    return f"lru_cache({enc.enc(func)},typed={f['typed']},maxsize={f['maxsize']}," \
           f"hits={f['hits']},misses={f['misses']},{kind})" + enc._attrs(v)


_MISSING = object()
_STREAMS = ("stdin", "stdout", "stderr", "__stdin__", "__stdout__", "__stderr__")


def _standard_stream(v: Any) -> str | None:
    """``"sys.stderr"`` when ``v`` is the very object ``sys`` holds under one of
    :data:`_STREAMS` now (read from ``sys``'s namespace, no attribute hook), else None.
    Named, not read: ``sys``'s own globals are read by identity only (another module's
    global, :func:`value_text.object_text`), so a step could already use such a stream's
    position through ``sys``; naming it where the train file holds it loses nothing more.
    A ``threading.Thread`` holds ``sys.stderr`` (``_stderr``) from its creation: unreadable
    since R57c-3 made file objects so, a false UNKNOWN for a thread in a global (R57d-4)."""
    names = vars(sys)
    return next((f"sys.{n}" for n in _STREAMS if dict.get(names, n) is v), None)


def special_text(enc: Any, v: Any) -> str | None:  # noqa: PLR0911, C901 -- one case per kind
    """The text of a value whose state is not in attributes (adversarial finding R8-1), or
    None: read through its base type's own methods and descriptors, never a subclass's
    (R57b-2), with its own attributes (``enc._attrs``, R57b-1). ``enc``: the step-state
    encoder (``step_state._Encoder``: ``enc``, ``_attrs``, ``uncomparable``, ``unreadable``)."""
    t = type(v)
    mod = _type_module(t)
    if issubclass(type(v), _np_types()):    # (by numpy's types, never a module name: R58b-3)
        import numpy as np  # noqa: PLC0415 -- numpy is there: the value is numpy's

        # (through numpy's own methods, never a subclass's; its attributes too: R57b-1/2)
        if issubclass(type(v), np.generic) and np.generic.ndim.__get__(v) == 0:
            return f"{_qual(t)}:{np.generic.item(v)!r}" + enc._attrs(v)
        if issubclass(type(v), np.ndarray):
            base = np.ndarray.view(v, np.ndarray)
            if base.dtype.hasobject:
                enc.uncomparable = enc.unreadable = True
                return f"<numpy object array {base.shape}>"
            mask = np.ma.getmaskarray(base).tobytes() if issubclass(type(v),
                                                                    np.ma.MaskedArray) \
                else b""   # (a masked array's mask read by numpy, the class is numpy's)
            if mask:
                mask = np.ma.MaskedArray.mask.__get__(v).tobytes()
            raw = np.ascontiguousarray(base).tobytes() + mask
            return f"{_qual(t)}:{base.dtype.str}:{base.shape}:" \
                   f"{hashlib.sha1(raw).hexdigest()}" + enc._attrs(v)  # noqa: S324
        if issubclass(type(v), np.random.Generator):
            bg = np.random.Generator.bit_generator.__get__(v)
            if _type_module(type(bg)).split(".")[:2] != ["numpy", "random"]:
                enc.uncomparable = enc.unreadable = True
                return f"<numpy.Generator over {_qual(type(bg))}>"
            return f"numpy.Generator({enc.enc(type(bg).state.__get__(bg))})" \
                + enc._attrs(v)
        if issubclass(type(v), np.random.RandomState):
            return f"numpy.RandomState({_digest(repr(np.random.RandomState.get_state(v)))})" \
                + enc._attrs(v)
    if issubclass(type(v), torch.Generator):
        from torch.utils._python_dispatch import _disable_current_modes  # noqa: PLC0415

        with _disable_current_modes():     # (torch's own methods; attributes: R57b-1/2)
            state = torch.Generator.get_state(v).numpy().tobytes()
            return f"torch.Generator({torch.Generator.device.__get__(v)}:" \
                   f"{hashlib.sha1(state).hexdigest()})" + enc._attrs(v)  # noqa: S324
    if issubclass(type(v), torch._C.Future):   # its state is in C: done, and its value (R55c-3)
        if not torch._C.Future.done(v):       # (the C methods, never a subclass's: R57c-4)
            return f"{_qual(t)}(pending){enc._attrs(v)}"
        try:
            return f"{_qual(t)}(done:{enc.enc(torch._C.Future.value(v))}){enc._attrs(v)}"
        except Exception:  # noqa: BLE001 -- it holds an error
            return f"{_qual(t)}(error){enc._attrs(v)}"
    if issubclass(type(v), random.Random):     # its state is in C, not in __dict__ (R9-1)
        import _random  # noqa: PLC0415 -- the C generator's own getstate (R57b-2)

        return f"{_qual(t)}({_digest(repr(_random.Random.getstate(v)))}){enc._attrs(v)}"
    if issubclass(type(v), collections.defaultdict):   # default_factory is in C (R9-1)
        factory = collections.defaultdict.default_factory.__get__(v)     # (R57b-2)
        return f"defaultdict({enc.enc(factory)}){{" + ",".join(
            f"{enc.enc(k)}:{enc.enc(x)}" for k, x in _items(v)) + "}" + enc._attrs(v)
    if type(v) is types.MappingProxyType:  # a dataclass field's metadata, a class dict
        inner = gc.get_referents(v)       # the mapping it wraps, read as a dict (R57b-2)
        if len(inner) != 1 or not issubclass(type(inner[0]), dict):
            enc.uncomparable = enc.unreadable = True
            return "<mappingproxy over another mapping>"
        # in full, as the dict it is: a subclass's attributes, a defaultdict's factory (R58b-2)
        return f"mappingproxy({enc.enc(inner[0])})"
    if issubclass(type(v), collections.deque):
        return f"deque(maxlen={v.maxlen})[" + ",".join(
            enc.enc(x) for x in collections.deque.__iter__(v)) + "]" \
            + enc._attrs(v)
    if issubclass(type(v), (bytearray, array.array)):
        code = array.array.typecode.__get__(v) if issubclass(t, array.array) else ""
        raw = bytes(memoryview(v))      # (the buffer, not a subclass's methods: R57b-2)
        return (f"{_qual(t)}:{code}:{raw!r}" if len(raw) <= 64 else
                f"{_qual(t)}:{code}:{hashlib.sha1(raw).hexdigest()}") \
            + enc._attrs(v)  # noqa: S324 -- its attributes too (R57b-1)
    if issubclass(type(v), weakref.ReferenceType):     # its callback too (R58b-1)
        callback = weakref.ReferenceType.__dict__["__callback__"].__get__(v)
        return f"weakref({enc.enc(weakref.ref.__call__(v))},{enc.enc(callback)})" \
            + enc._attrs(v)
    if issubclass(type(v), re.Pattern):
        return f"re({v.pattern!r},{v.flags})"
    if t is _LRU:           # (the type itself, never one of that name: R58b-3)
        return _lru_text(enc, v)
    if issubclass(t, _FINALIZE) and t is not _FINALIZE:    # its own registry, record class
        enc.uncomparable = enc.unreadable = True            # or methods (R58e-1, R58e-5)
        return f"<a weakref.finalize subclass {_qual(t)}>"
    if t is _FINALIZE:      # its function, arguments and index are in the class's registry
        registry = type.__dict__["__dict__"].__get__(t).get("_registry")    # (R58d-3)
        info = next((i for k, i in dict.items(registry) if k is v), _MISSING) \
            if type(registry) is dict else _MISSING
        if info is _MISSING:
            enc.uncomparable = enc.unreadable = True
            return "<weakref.finalize without its registry>"
        return f"weakref.finalize({enc.enc(info)})"
    if t is _TUPLEGETTER:   # a namedtuple's field: its index and doc, in C (R58a-5)
        index, doc = _TUPLEGETTER.__reduce__(v)[1]
        return f"tuplegetter({index},{enc.enc(doc)})"
    if issubclass(type(v), io.StringIO):      # its buffer is in C (R10-2)
        return f"StringIO({_digest(io.StringIO.getvalue(v))},{io.StringIO.tell(v)})" \
            + enc._attrs(v)
    if issubclass(type(v), io.BytesIO):
        return f"BytesIO({hashlib.sha1(io.BytesIO.getbuffer(v)).hexdigest()}," \
               f"{io.BytesIO.tell(v)})" \
            + enc._attrs(v)  # noqa: S324 -- a digest
    if issubclass(type(v), (staticmethod, classmethod)):   # its function (R57c-3)
        base = staticmethod if issubclass(t, staticmethod) else classmethod
        return f"{base.__name__}({enc.enc(base.__dict__['__func__'].__get__(v))})" \
            + enc._attrs(v)
    if issubclass(t, property):     # its accessors and doc, in C (R65e-6: jinja2's Template)
        parts = (property.__dict__[a].__get__(v) for a in ("fget", "fset", "fdel", "__doc__"))
        return "property(" + ",".join(enc.enc(x) for x in parts) + ")" + enc._attrs(v)
    if t is types.CodeType:     # immutable (R65e-5: a ForwardRef's ``__forward_code__``)
        return f"code:{enc._code(v)}"
    ufunc = _ufunc_name(v)
    if ufunc is not None:       # numpy's own ufunc, by its name (R65e-4: sympy's lambdify),
        return f"numpy.ufunc:{ufunc}" + enc._attrs(v)   # and what a dispatcher's dict holds
    if issubclass(type(v), io.IOBase):      # a file's position and buffers are in C (R57c-3)
        std = _standard_stream(v)
        if std is not None:     # the process's own, as ``sys`` holds it (R57d-4: a Thread)
            return f"<{std}>{identity_text(v)}"
        enc.uncomparable = enc.unreadable = True
        return f"<file object {_qual(t)}>"
    if issubclass(type(v), (types.MemberDescriptorType, types.GetSetDescriptorType)):
        return f"descriptor:{getattr(v, '__qualname__', '')}"   # a slot of a class body
    if issubclass(type(v), _LOCKS):   # held or not (R11-3); an RLock by its count
        base = next(b for b in _LOCKS if issubclass(t, b))     # (its own methods: R57b-2)
        held = base.locked(v) if base is _LOCKS[0] else \
            re.search(r"count=(\d+)", base.__repr__(v)).group(1)  # type: ignore[union-attr]
        return f"<lock {_qual(t)} {held}>" + enc._attrs(v)
    ctypes = sys.modules.get("ctypes")
    if ctypes is not None and issubclass(type(v), ctypes._Pointer):  # noqa: SLF001
        # what it points to (R12-2), not its address (ctypes' own methods: R57c-4)
        null = not ctypes._Pointer.__bool__(v)  # noqa: SLF001
        return f"{_qual(t)}->" + ("NULL" if null else enc.enc(
            ctypes._Pointer.contents.__get__(v))) + enc._attrs(v)  # noqa: SLF001
    if ctypes is not None and issubclass(type(v), (
            ctypes._SimpleCData, ctypes.Structure, ctypes.Union, ctypes.Array)):  # noqa: SLF001
        # its value is in C memory (R11-3), by its bytes: a structure, union or array (whose
        # fields may be pointers, their targets unread: R57c-6) or a pointer-valued simple type
        # is unreadable
        if not issubclass(t, ctypes._SimpleCData) or t._type_ in ("P", "z", "Z", "O"):  # noqa
            enc.uncomparable = enc.unreadable = True
            return f"<ctypes {_qual(t)}>"
        return f"{_qual(t)}:{hashlib.sha1(bytes(memoryview(v))).hexdigest()}" \
            + enc._attrs(v)  # noqa: S324 -- a digest
    if t in _LOGGING:       # (logging's own classes, not ones of those names: R58b-3)
        # logging's own loggers without their level cache and the logger tree, which fill
        # as they are used and differ between processes (false refusal F11-2); every
        # other attribute, handlers and filters included, is read (R12-1)
        return f"logging:{_qual(t)}" + enc._attrs(v, skip=_LOGGER_CACHES) + \
            _logger_links(v)
    return None
