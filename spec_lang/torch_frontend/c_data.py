"""C data that is no reference, read by the types' own C methods for
:func:`spec_lang.torch_frontend.value_text.deep_text` (adversarial rounds 59c, 59e: R59c-2,
R59e-2): a signal handler, finalizer or exit callback holding a ``random.Random``, an
``itertools.count``, a ``bytearray``, a hash object or a ``StringIO`` keeps its counter where
``gc.get_referents`` reads nothing.
"""

from __future__ import annotations

import array
import ctypes
import decimal
import hashlib
import io
import mmap
import random
import re
import sys
import threading
import types
import weakref
from typing import Any

from spec_lang.torch_frontend.special_values import _STREAMS
from spec_lang.torch_frontend.value_text import (_DATA, TOO_DEEP,
                                                 TPFLAGS_HEAPTYPE, _data_text, _digest,
                                                 _part_text, _type_module)

__all__ = ["c_value"]

# the types of hashlib's objects (OpenSSL's and the built-in ones)
_HASHES = frozenset(type(hashlib.new(n)) for n in ("md5", "sha1", "sha256", "sha512",
                                                     "blake2b", "sha3_256"))
# C types whose data no method of theirs gives back: compressors, scanners, writers (R59e-2)
# (an open file is read by identity and its references, as logging's handlers hold them: its
# position and buffer change with every line logged)
_UNREADABLE_MODULES = frozenset({"zlib", "_bz2", "_lzma", "_csv", "_pickle"})
_SCANNER = type(re.compile("").scanner(""))     # (a compiled pattern or a match is immutable)


def c_value(x: Any, depth: int = 0, budget: list[int] | None = None) -> str | None:
    """The state a C type keeps as data, not references, read by its own C methods (no code
    of the value's): ``bytearray``, ``array.array``, ``io.BytesIO`` / ``io.StringIO``,
    ``memoryview``, ``mmap`` (bytes and position), ``ctypes`` values, arrays and structures
    (their bytes), the Mersenne state of a ``random.Random``, a hash object's digest, a
    ``decimal.Context``'s settings, a lock's state, and what ``__reduce__`` gives for
    ``itertools`` objects and the built-in and ``collections`` iterators (their position;
    none: unreadable); a closed stream or ``mmap`` as closed (R60a-5); unreadable
    (:data:`TOO_DEEP`) for the compressors, ``re`` scanners and ``csv`` writers (R59e-2);
    None for any other object (its references are read; the data of another C type, a numpy
    array's say, is not: docs/torch.md). ``depth``, ``budget``: as :func:`value_text.deep_text`
    counts them."""
    t = type(x)
    if issubclass(t, _DATA):             # a number, string or bytes of a subclass (IntEnum)
        return "=" + _data_text(x)
    if any(x is getattr(sys, n, None) for n in _STREAMS):
        return "=the process's standard stream"     # (named, not read: R57d-4)
    if issubclass(t, weakref.ReferenceType):        # its referent (the callback is a reference)
        return "=ref:" + _part_text(weakref.ReferenceType.__call__(x), depth + 1, budget)
    if t is slice:
        return "=slice" + _part_text((x.start, x.stop, x.step), depth + 1, budget)
    if t in (range, types.CodeType, _CAPSULE):    # immutable (a code object, a C pointer
        return "=" + repr(x) if t is range else ""  # capsule: by identity)
    if issubclass(t, bytearray):
        return f"=bytearray:{_data_text(bytes(bytearray.__iter__(x)))}"
    if issubclass(t, array.array):
        return f"=array:{array.array.__dict__['typecode'].__get__(x)}:" \
               f"{_data_text(array.array.tobytes(x))}"
    # (a subclass by its C base's methods: R60c-5; its own attributes are read by the caller)
    base = next((b for b in (io.BytesIO, io.StringIO) if issubclass(t, b)), None)
    if base is not None:                  # (closed: its data is gone, R60a-5)
        return f"={base.__name__}:closed" if base.closed.__get__(x) else \
            f"={base.__name__}:{_data_text(base.getvalue(x))}:{base.tell(x)}"
    if t is memoryview:
        return f"=memoryview:{_data_text(memoryview.tobytes(x))}"
    if issubclass(t, mmap.mmap):          # its bytes and its position (R60a-4)
        if mmap.mmap.closed.__get__(x):
            return "=mmap:closed"
        return f"=mmap:{_data_text(mmap.mmap.__getitem__(x, slice(None)))}:{mmap.mmap.tell(x)}"
    if issubclass(t, (ctypes._SimpleCData, ctypes.Array, ctypes.Structure,  # noqa: SLF001
                      ctypes.Union)):
        if any(b.__flags__ & TPFLAGS_HEAPTYPE and _type_module(b) != "ctypes"
               and "__init__" in vars(b) for b in t.__mro__):
            return TOO_DEEP     # (a subclass's own code: not read)
        return f"=ctypes:{_data_text(memoryview(x).cast('B').tobytes())}"
    if t in _HASHES:
        try:
            return f"=hash:{t.copy(x).hexdigest()}"
        except TypeError:       # (shake: a length is needed)
            return TOO_DEEP
    if issubclass(t, decimal.Context):
        if t is not decimal.Context:
            return TOO_DEEP     # (a subclass's attributes may be its own code's: R60c-5)
        return "=context:" + repr((x.prec, x.rounding, x.Emin, x.Emax, x.capitals, x.clamp,
                                   sorted((k.__name__, v) for k, v in x.flags.items()),
                                   sorted((k.__name__, v) for k, v in x.traps.items())))
    if _type_module(t) in _UNREADABLE_MODULES or t is _SCANNER:
        return TOO_DEEP
    if issubclass(t, random.Random):
        return f"=random:{_digest(repr(random.Random.__mro__[1].getstate(x)))}"
    if t in (type(threading.Lock()), type(threading.RLock())):
        return f"=lock:{t.__repr__(x).split(' at ')[0]}"
    it = next((b for b in t.__mro__ if _type_module(b) in ("itertools", "_collections")
               or b.__name__.endswith("iterator") and _type_module(b) == "builtins"), None)
    if it is not None:        # (a subclass by its C base's ``__reduce__``: R60c-5)
        try:
            state = it.__reduce__(x)
        except (TypeError, ValueError):
            return TOO_DEEP
        return "=" + _part_text(state[1:], depth + 1, budget)
    return None     # (any other C type's data, a numpy array's say, is not read: docs)


_CAPSULE = type(types.CodeType.__dict__.get("co_code") and
                __import__("datetime").datetime_CAPI)   # PyCapsule (no name in ``types``)


