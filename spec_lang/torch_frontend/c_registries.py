"""Registries the interpreter keeps in C, held by no module and listed by no Python function,
read for the step-state fingerprint (:mod:`spec_lang.torch_frontend.process_state`):

- the exit callbacks ``atexit.register`` adds (adversarial finding R58f-4: a counter in a
  registered object, read and bumped through ``atexit.unregister``'s ``==``);
- the codec registry: the search functions ``codecs.register`` adds, the cache of the
  ``CodecInfo`` objects they returned, and the error handlers ``codecs.register_error`` adds
  (R58f-3: a counter in a cached ``CodecInfo``, reached by ``codecs.lookup``);
- audit hooks (``sys.addaudithook``): they run on every audited event, the step's too, and
  can neither be listed nor removed; one the train file adds is refused (exit 3, naming its
  line) and recorded, so a train file that catches the refusal is unreadable. Our own hook
  also records the train file's ``gc.get_referrers`` / ``gc.get_objects`` /
  ``gc.get_referents`` calls: they reach the containers the interpreter holds in C (the codec
  cache: R59d-2; a C module's state: R60b-4).

Which exit callbacks a module's import registered is recorded as it happens
(:func:`watch_atexit`): ``atexit.register`` is wrapped, before the train file runs, by one
that notes the callbacks registered by module-level code of a module being imported (R59d-1).

How they are found (CPython 3.11, ``Include/internal/pycore_interp.h``): the interpreter's
state holds ``struct atexit_state {atexit_callback **callbacks; int ncallbacks; int
callback_len;}`` (each callback ``{func, args, kwargs}``; ``atexit.unregister`` empties a slot
and leaves the count, ``Modules/atexitmodule.c``) and the three codec objects side by side
(``codec_search_path``, ``codec_search_cache``, ``codec_error_registry``). Their offsets are
found once, when this module is imported (before the train file runs), by searching the
interpreter's state through ``/proc/self/mem`` (an unmapped address is an error there, never
a crash) for our own probe: a callback we register with known arguments, and the three
consecutive words that point to a list and two dicts (their type words read first) holding
``encodings.search_function``, the ``utf-8`` ``CodecInfo`` and the ``strict`` handler.
Exactly one match each, read back, or the registry is unreadable (every fingerprint that needs
it is then UNKNOWN, never a guess).
"""

from __future__ import annotations

import atexit
import codecs
import collections
import ctypes
import encodings
import importlib.machinery
import os
import sys
import types
from collections.abc import Callable
from typing import Any

from spec_lang.torch_frontend.c_settings import SETTINGS, c_settings
from spec_lang.torch_frontend.library_files import library_code, take_library_dirs
from spec_lang.torch_frontend.module_members import library_class
from spec_lang.torch_frontend.value_text import (UNREADABLE, _global_text, _ident, _items,
                                                 _type_module, deep_text, key_text,
                                                 object_text, own_dict)

__all__ = ["registry_texts", "imported_in_step", "watch_audit_hooks", "watch_atexit",
           "c_settings", "AuditHookAdded", "ATEXIT", "CODECS", "AUDIT", "SETTINGS"]

ATEXIT = "exit callbacks (atexit)"
CODECS = "the codec registry (search functions, cache, error handlers)"
AUDIT = "audit hooks"

_WORD = ctypes.sizeof(ctypes.c_void_p)
_SCAN_BYTES = 1 << 17        # of the interpreter's state searched (3.11's is ~80 KB)


def _interpreter() -> int:
    """The address of this interpreter's ``PyInterpreterState`` (a prototype of our own: the
    shared ``ctypes.pythonapi`` function's ``restype`` is not touched)."""
    get = ctypes.PYFUNCTYPE(ctypes.c_void_p)(("PyInterpreterState_Get", ctypes.pythonapi))
    return int(get() or 0)


class _ProcessMemory:
    """This process's memory read through ``/proc/self/mem`` (one descriptor for many reads):
    an unmapped address reads as fewer bytes or none, never a crash."""

    def __enter__(self) -> _ProcessMemory:
        try:
            self.fd = os.open("/proc/self/mem", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            self.fd = -1
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.fd >= 0:
            os.close(self.fd)

    def read(self, addr: int, n: int) -> bytes:
        """Up to ``n`` bytes at ``addr``."""
        if self.fd < 0:
            return b""
        try:
            return os.pread(self.fd, n, addr)
        except (OSError, OverflowError, ValueError):
            return b""

    def word(self, addr: int) -> int:
        """The machine word at ``addr``, 0 where it cannot be read."""
        return int.from_bytes(self.read(addr, _WORD).ljust(_WORD, b"\0"), sys.byteorder)


def _words(mem: bytes) -> list[int]:
    return [int.from_bytes(mem[i:i + _WORD], sys.byteorder)
            for i in range(0, len(mem) - _WORD + 1, _WORD)]


def _int32(mem: bytes, at: int) -> int:
    return int.from_bytes(mem[at:at + 4], sys.byteorder, signed=True)


def _object_at(addr: int) -> Any:
    """The object a ``PyObject *`` stored at ``addr`` points to (a new reference), or a
    sentinel for NULL."""
    p = ctypes.c_void_p.from_address(addr).value
    return _NULL if not p else ctypes.cast(ctypes.c_void_p(p), ctypes.py_object).value


_NULL = object()


def _atexit_probe(*args: Any, **kwargs: Any) -> None:
    """Our own exit callback, registered and unregistered while the layout is found."""


def _atexit_slots(interp: int, off: int) -> list[tuple[Any, Any, Any]]:
    """Every registered exit callback: (func, args, kwargs), kwargs ``_NULL`` when none."""
    base = ctypes.c_void_p.from_address(interp + off).value or 0
    n = ctypes.c_int.from_address(interp + off + _WORD).value
    out = []
    for i in range(max(n, 0)):
        cb = ctypes.c_void_p.from_address(base + i * _WORD).value
        if cb:
            out.append(tuple(_object_at(cb + j * _WORD) for j in range(3)))
    return out


def _find_atexit(interp: int) -> int | None:
    """The offset of ``struct atexit_state`` in the interpreter's state, or None."""
    if not interp or _WORD != 8:
        return None
    atexit.register(_atexit_probe, 1, k=2)
    try:
        n = atexit._ncallbacks()  # noqa: SLF001
        with _ProcessMemory() as mem:
            state = mem.read(interp, _SCAN_BYTES)
            hits = [j * _WORD for j, p in enumerate(_words(state))
                    if p and j * _WORD + 16 <= len(state)
                    and _int32(state, j * _WORD + 8) == n
                    and n <= _int32(state, j * _WORD + 12) <= 1 << 24
                    and (slot := mem.word(p + (n - 1) * _WORD))
                    and mem.word(slot) == id(_atexit_probe)]
        if len(hits) != 1:
            return None
        last = _atexit_slots(interp, hits[0])[-1]
        if last[0] is not _atexit_probe or last[1] != (1,) or last[2] != {"k": 2}:
            return None
    finally:
        atexit.unregister(_atexit_probe)
    left = _atexit_slots(interp, hits[0])
    return hits[0] if all(s[0] is not _atexit_probe for s in left) else None


def _find_codecs(interp: int) -> tuple[list, dict, dict] | None:
    """The interpreter's codec search path, cache and error registry, or None: the one triple
    of consecutive words in its state that point to a list, a dict and a dict (their type words
    read through ``/proc/self/mem`` before any is used as an object) holding
    ``encodings.search_function``, the ``utf-8`` ``CodecInfo`` and the ``strict`` handler."""
    if not interp or _WORD != 8:
        return None
    info, strict = codecs.lookup("utf-8"), codecs.lookup_error("strict")
    kinds = (id(list), id(dict), id(dict))
    with _ProcessMemory() as mem:
        words = _words(mem.read(interp, _SCAN_BYTES))
        pointer = [bool(w) and not w % _WORD and 1 << 16 < w < 1 << 56 for w in words]
        found = [words[i:i + 3] for i in range(len(words) - 2)
                 if pointer[i] and pointer[i + 1] and pointer[i + 2]
                 and all(mem.word(w + _WORD) == t for w, t in zip(words[i:i + 3], kinds))]
    hits = []
    for triple in found:
        path, cache, errors = (ctypes.cast(ctypes.c_void_p(w), ctypes.py_object).value
                               for w in triple)
        if any(f is encodings.search_function for f in list.__iter__(path)) \
                and any(v is info for v in dict.values(cache)) \
                and dict.get(errors, "strict") is strict:
            hits.append((path, cache, errors))
    return hits[0] if len(hits) == 1 else None


_INTERP = _interpreter()
_ATEXIT_OFFSET = _find_atexit(_INTERP)
_CODECS = _find_codecs(_INTERP)
_AUDIT_ADDED: list[int] = []
_AUDIT_WATCHED: list[bool] = []
_GC_READS: list[str] = []      # "file:line (event)" of each call (_GC_EVENTS) not ours
# (get_referents too: it reaches a C module's state, its caches: R60b-4). Not ctypes' ways from
# an address to an object: ``ctypes.cast(addr, py_object)`` raises no audit event on CPython
# 3.11 (R64b-2), and those that do (``from_address``, ``from_buffer_copy``) are what
# ``multiprocessing.Value`` and numpy's ``as_ctypes`` raise at a right plan's import (R64c-1/-2):
# what the interpreter may call on the step's behalf is read in full instead (R64a-2)
_GC_EVENTS = frozenset({"gc.get_referrers", "gc.get_objects", "gc.get_referents"})
_OURS = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # spec_lang/


# every code object of spec_lang's functions (and the code nested in them) -> its module's globals
_OUR_CODE: dict[types.CodeType, dict] = {}
_OUR_MODULES: set[str] = set()               # the modules whose code is in it


def _code_tree(code: types.CodeType, g: dict, out: dict[types.CodeType, dict]) -> None:
    """``code`` and the code objects nested in it (inner functions, comprehensions)."""
    if code not in out:
        out[code] = g
        for c in code.co_consts:
            if type(c) is types.CodeType:
                _code_tree(c, g, out)


def _ours(frame: Any) -> bool:
    """``frame`` runs the front end's own code: a function's code (or code nested in it) of a
    ``spec_lang`` module loaded before the train file runs (:func:`watch_audit_hooks` takes
    them in), by identity, with that module's globals (R60c-1: our code object run with the
    train file's globals); not code compiled under a ``spec_lang`` file name (R60a-2) nor a
    module the train file names ``spec_lang.*`` (R60b-9). Open (R60c-2): the train file
    calling one of our functions that calls the collector, with arguments of its own (the
    front end takes fingerprints with the train file's frames on the stack, so the stack
    cannot tell)."""
    return _OUR_CODE.get(frame.f_code) is frame.f_globals


def _take_in_our_code() -> None:
    """Every code object of the functions (and classes' functions) of the ``spec_lang``
    modules loaded now, and the code nested in them, into :data:`_OUR_CODE`."""
    for name, m in list(sys.modules.items()):
        if name.partition(".")[0] != "spec_lang" or name in _OUR_MODULES \
                or type(m) is not types.ModuleType:
            continue
        _OUR_MODULES.add(name)
        for v in list(dict.values(vars(m))):
            parts = list(type.__dict__["__dict__"].__get__(v).values()) \
                if issubclass(type(v), type) else [v]
            for f in parts:
                f = f.__func__ if type(f) in (staticmethod, classmethod) else \
                    f.fget if type(f) is property else f
                if type(f) is types.FunctionType and f.__code__.co_filename.startswith(_OURS) \
                        and f.__globals__ is vars(m):
                    _code_tree(f.__code__, vars(m), _OUR_CODE)


class AuditHookAdded(BaseException):
    """The train file called ``sys.addaudithook`` (:func:`watch_audit_hooks`); its message
    is a one-line ``file:line:`` error. A ``BaseException``: ``sys.addaudithook`` swallows
    every ``Exception`` its hooks raise."""


def watch_audit_hooks() -> None:
    """Refuse the audit hooks added from now on (``prove --torch``'s capture child, before the
    train file is imported): adding one raises the ``sys.addaudithook`` event in the hooks
    already there, ours among them, which records it and raises :class:`AuditHookAdded`
    naming the caller's line, so the hook is not added (``sys.addaudithook`` adds none when a
    hook raises; it passes on only what is no ``Exception``) and the capture ends with that
    error. A train file that catches it runs without its hook, and the record makes the
    fingerprint unreadable; one that also empties the record sets out to tell the capture
    from the run (R59a-2; docs/torch.md). The hook also records each ``gc.get_referrers`` /
    ``gc.get_objects`` / ``gc.get_referents`` call from code not the front end's own
    (:func:`_ours`; file:line): they hand the train file containers only the interpreter
    holds, such as the codec cache (R59d-2), so a fingerprint taken after one is unreadable.
    Audit hooks cannot be removed, so this is called once per process."""
    if _AUDIT_WATCHED:
        return
    # the front end's functions, before the train file runs (the modules whose functions
    # call the collector: loaded first)
    import spec_lang.torch_frontend.dispatcher_guard
    import spec_lang.torch_frontend.op_guard
    import spec_lang.torch_frontend.pp_guard
    import spec_lang.torch_frontend.special_values
    import spec_lang.torch_frontend.stale_refs
    import spec_lang.torch_frontend.step_state
    import spec_lang.torch_frontend.value_text  # noqa: F401
    _take_in_our_code()

    def hook(event: str, args: tuple, added: list[int] = _AUDIT_ADDED,
             gc_reads: list[str] = _GC_READS) -> None:
        if event in _GC_EVENTS:
            caller = sys._getframe(1)  # noqa: SLF001 -- the frame calling the gc function
            if not _ours(caller):
                gc_reads.append(f"{caller.f_code.co_filename}:{caller.f_lineno} ({event})")
        elif event == "sys.addaudithook":
            added.append(1)
            caller = sys._getframe(1)  # noqa: SLF001 -- the frame calling sys.addaudithook
            raise AuditHookAdded(
                f"{caller.f_code.co_filename}:{caller.f_lineno}: the train file adds an audit "
                "hook (sys.addaudithook): it would run on every audited event of every step, "
                "and prove --torch can neither read nor remove it; add it outside the train "
                "file")

    sys.addaudithook(hook)
    _AUDIT_WATCHED.append(True)


_REGISTER = atexit.register
_RUN_EXITFUNCS = atexit._run_exitfuncs  # noqa: SLF001
# why the exit callbacks were run from the step's side, once set: sticky
_EXIT_REACHED: list[str] = []
# the exit callbacks registered before the train file ran (:func:`watch_atexit`), kept alive
_PRESENT: list[tuple[Any, Any]] = []   # (callback, its module's name when taken: R65a-2)
_IMPORT_REGISTERED: list[tuple[str, Any]] = []   # (module, callback): registered by its import
# those of them a library's own file registered: (module name, its globals, callback)
_LIBRARY_REGISTERED: list[tuple[str, dict, Any]] = []
_FIRST_IMPORT: dict[str, dict] = {}      # module name -> the globals of its first import
_RUN_MODULE = None


def _import_registration(frame: Any) -> str | None:
    """The module whose import is registering an exit callback now, or None: ``frame`` (the
    caller of ``atexit.register``) and the frames below it up to module-level code all run
    with that module's globals (a decorator in a class body, a function of the module), the
    module-level code is ``sys.modules``' module of that name, marked by importlib as being
    imported (``__spec__._initializing``), importlib's own function ran it (R59d-1), and it
    is that name's first module in the process (``sys.modules`` at :func:`watch_atexit`, or
    the first import since: R60a-1)."""
    g = frame.f_globals
    for _ in range(32):
        if frame is None or frame.f_globals is not g:
            return None
        if frame.f_code.co_name == "<module>":
            break
        frame = frame.f_back
    else:
        return None
    name = dict.get(g, "__name__")
    m = sys.modules.get(name) if type(name) is str else None
    spec = getattr(m, "__spec__", None) if type(m) is types.ModuleType else None
    back = frame.f_back
    if m is None or vars(m) is not g or getattr(spec, "_initializing", False) is not True \
            or back is None or back.f_code is not _RUN_MODULE:
        return None
    # the module's first import in this process only: one removed from ``sys.modules`` and
    # imported again, 1000 times, is not (R60a-1)
    return name if _FIRST_IMPORT.setdefault(name, g) is g else None


def watch_atexit() -> None:
    """Wrap ``atexit.register`` (``prove --torch``'s capture child, before the train file is
    imported) so that a callback a module's own import registers is recorded with the module:
    such a callback, of a library module first imported in the step, is no change
    (:func:`imported_in_step`), as the module's globals are not; one the train file registers,
    even a library module's function, is not recorded and is a change (R59d-1: the train file
    registered ``filecmp.clear_cache`` 1000 times and counted them with
    ``atexit._ncallbacks()``). Calling the C function by another route records nothing, so
    it is a change too. The callbacks registered before are kept (:data:`_PRESENT`), and those
    the import of a library's own file registers are noted (:data:`_LIBRARY_REGISTERED`,
    ``library_files.library_code``): :func:`library_callbacks`. Called once per process."""
    global _RUN_MODULE     # noqa: PLW0603 -- importlib's function that runs a module's code
    if atexit.register is not _REGISTER:
        return
    import importlib._bootstrap as bootstrap

    _RUN_MODULE = bootstrap._call_with_frames_removed.__code__  # noqa: SLF001
    _FIRST_IMPORT.update({n: vars(m) for n, m in list(sys.modules.items())
                          if type(m) is types.ModuleType})
    if _ATEXIT_OFFSET is not None:
        _PRESENT.extend((f, _function_module(f))
                        for f, _, _ in _atexit_slots(_INTERP, _ATEXIT_OFFSET))
    take_library_dirs()

    def register(func: Any, /, *args: Any, **kwargs: Any) -> Any:
        frame = sys._getframe(1)  # noqa: SLF001 -- the caller's frame
        name = _import_registration(frame)
        if name is not None:
            _IMPORT_REGISTERED.append((name, func))
            while frame.f_code.co_name != "<module>":   # (_import_registration found it)
                frame = frame.f_back
            spec = vars(sys.modules[name]).get("__spec__")
            if type(spec) is importlib.machinery.ModuleSpec and library_code(
                    frame.f_code, spec.origin):
                _LIBRARY_REGISTERED.append((name, frame.f_globals, func))
        # (no keywords: none passed on, so the slot holds NULL as the C function alone makes)
        return _REGISTER(func, *args, **kwargs) if kwargs else _REGISTER(func, *args)

    register.__doc__, register.__qualname__ = _REGISTER.__doc__, "register"
    register.__module__ = "atexit"
    atexit.register = register

    # ``_run_exitfuncs`` runs every callback now, a library's on its library's state (also
    # seen as every slot emptied). (``atexit.unregister(x)`` hands each callback to ``x``'s
    # ``==``: the callbacks the train file registers are read in full, R63e-1 / R64a-1)
    def run_exitfuncs() -> Any:
        _EXIT_REACHED.append("atexit._run_exitfuncs ran the exit callbacks")
        return _RUN_EXITFUNCS()

    run_exitfuncs.__doc__, run_exitfuncs.__qualname__ = _RUN_EXITFUNCS.__doc__, "_run_exitfuncs"
    run_exitfuncs.__module__ = "atexit"
    atexit._run_exitfuncs = run_exitfuncs    # noqa: SLF001


# the separators of :data:`ATEXIT`'s text: callbacks, and a callback's module from its text
CALLBACK_SEP, MODULE_SEP = "\x1e", "\x1f"


def _callback_text(func: Any, args: Any, kwargs: Any, from_user: Callable[[Any], bool],
                   imported: dict[int, list[str]], libraries: set[int] | None) -> str:
    """``MODULE<MODULE_SEP>TEXT``: the function with its parts and its arguments; MODULE is
    the module whose import registered this callback (``imported``: id -> the modules left to
    match, :func:`watch_atexit`) when it is a plain function of a module that is not the
    user's, called with no arguments (exempt when that module is new in the step,
    :func:`imported_in_step`), else empty. ``libraries``: the ids of the callbacks the
    libraries registered (:func:`library_callbacks`; None: every one, :func:`watch_atexit`
    not called in this process). Those are read as module globals; any other callback with
    all it holds (``deep_text``)."""
    # each argument as a finalizer's (process_state._finalizers): by value or by identity
    # and its own attributes; what a container holds, changed in place, is not read
    args_text = [deep_text(a) for a in tuple.__iter__(args)] \
        if type(args) is tuple else f"<{_ident(args)}>"
    kw = "" if kwargs is _NULL else [f"{key_text(k)}={deep_text(a)}"
                                     for k, a in _items(kwargs)] \
        if type(kwargs) is dict else f"<{_ident(kwargs)}>"
    # a library's own function (logging.shutdown, whose default holds every logging handler
    # made, nested past any depth) as a module global is read; the user's with all it holds
    library = type(func) is types.FunctionType and not from_user(func)
    theirs = libraries is None or id(func) in libraries
    # a library file's import registered a builtin or a library object's bound method (PIL's
    # ``clear_cache``, matplotlib's ``Gcf.destroy_all``): exempt as new in the step too (R64d-2)
    c_or_bound = theirs and (type(func) is types.BuiltinFunctionType or (
        type(func) is types.MethodType and not from_user(func.__func__)
        and not from_user(func.__self__)))
    by_import = imported.get(id(func))
    mod = by_import.pop() if (library or c_or_bound) and by_import and type(args) is tuple \
        and not tuple.__len__(args) and kwargs is _NULL else ""
    # a library's function, or a bound method of a library's object (z3's ExitStack
    # ``close``, whose callbacks grow as resources are extracted), registered before the train
    # file ran or by a library file's import: by identity and own attributes, as a library
    # module's globals are read. Any other is read in full (a module the train file wrote and
    # imported: R64b-1): the step reaches it by ``atexit.unregister``'s ``==``, a second
    # ``atexit`` module's or by its address (R63e-1, R64a-1/-2)
    shallow = theirs and type(func) is types.MethodType and not from_user(
        func.__func__) and library_class(type(func.__self__))
    text = _global_text('func', func) if library and theirs else object_text(func) \
        if shallow else deep_text(func)
    return f"{mod}{MODULE_SEP}{_ident(func)}:{text}{args_text}{kw}"


def _function_module(f: Any) -> Any:
    """The ``__module__`` of a callback's function (a bound method's too); None for others."""
    fn = f.__func__ if type(f) is types.MethodType else f
    return fn.__module__ if type(fn) is types.FunctionType else None


def _module_holds(f: Any, mod: Any) -> bool:
    """A callback registered before the train file ran still runs with the globals of the module
    ``sys.modules`` holds under the name ``mod`` its function's ``__module__`` had then
    (R64e-1: the train file dropped ``multiprocessing.util`` and imported it again, so the
    first copy's globals, which ``_exit_function`` still runs with, were read nowhere; R65a-2:
    ``__module__`` reassigned to the name the first copy was kept under); a C function has
    none."""
    fn = f.__func__ if type(f) is types.MethodType else f
    if type(fn) is not types.FunctionType:
        return True
    m = sys.modules.get(mod) if type(mod) is str else None
    return type(m) is types.ModuleType and vars(m) is fn.__globals__


def library_callbacks() -> set[int] | None:
    """The ids of the exit callbacks read as a library's (:func:`_callback_text`): registered
    before the train file ran (:func:`_module_holds`), or by the import of a library's own file
    (``library_files.library_code``) while ``sys.modules`` holds that very module under its
    name, whose globals are then read as a library module's (not a second copy of the file the
    train file loaded and dropped: R64d-1). None without :func:`watch_atexit` (every one)."""
    if _RUN_MODULE is None:
        return None
    return {id(f) for f, mod in _PRESENT if _module_holds(f, mod)} | {
        id(f) for name, g, f in _LIBRARY_REGISTERED
        if type(m := sys.modules.get(name)) is types.ModuleType and vars(m) is g}


def imported_in_step(before: str, after: str, new_module: Callable[[str], bool]) -> bool:
    """The exit callbacks changed in a step only by callbacks added by modules first imported
    in it (``new_module``; torch imports ``torch._inductor`` lazily, whose import registers
    ``dump_cache_stats``), which the fingerprint does not read either (docs/torch.md)."""
    if before.startswith(UNREADABLE) or after.startswith(UNREADABLE):
        return False
    was, now = collections.Counter(before.split(CALLBACK_SEP)), \
        collections.Counter(after.split(CALLBACK_SEP))
    return not (was - now) and all(
        (m := item.split(MODULE_SEP, 1)[0]) and new_module(m) for item in now - was)


# the attributes ``codecs.CodecInfo.__new__`` sets
_CODEC_FIELDS = frozenset({"name", "encode", "decode", "incrementalencoder", "incrementaldecoder",
                           "streamwriter", "streamreader", "_is_text_encoding"})


def _codec_part(x: Any) -> bool:
    """A part of a standard codec: None, a C function, a function or class of the module
    ``encodings.*`` / ``codecs`` it names (a function by its code's file, a class by the
    module's global of its name), or such a function bound to an instance of such a class
    with no attributes of its own."""
    if x is None or type(x) is types.BuiltinFunctionType:
        return True
    if type(x) is types.MethodType:     # ``Codec().encode``: of a stateless codec object
        own = own_dict(x.__self__)
        return _codec_part(x.__func__) and _codec_part(type(x.__self__)) \
            and own is not None and not dict.__len__(own)
    mod = getattr(x, "__module__", None) if type(x) in (types.FunctionType, type) else None
    m = sys.modules.get(mod) if type(mod) is str and (
        mod.startswith("encodings.") or mod == "codecs") else None
    if m is None:
        return False
    g = vars(m)
    if type(x) is type:
        return g.get(x.__name__) is x
    # the module's own function, or its class's, by identity; no closure, no state of its own
    # (a function compiled under an encodings file and module name is not: R59d-3)
    own = [g.get(x.__name__)] + [vars(c).get(x.__name__) for c in list(g.values())
                                 if type(c) is type and _type_module(c) == mod]
    return any(f is x for f in own) and x.__closure__ is None and x.__globals__ is g \
        and x.__kwdefaults__ is None and not dict.__len__(x.__dict__) \
        and all(d is None or type(d) in (bool, int, float, str, bytes)
                for d in x.__defaults__ or ())


def _standard_codec(v: Any) -> bool:
    """``v`` is a ``CodecInfo`` as the standard search function (``encodings``) returns and
    caches it, untouched: its own attributes only those ``CodecInfo`` sets, its name a str,
    every codec part (attributes and tuple items) :func:`_codec_part`, and the same object
    ``encodings``' own cache holds. Such an entry's value is left out (a later lookup would
    make its equal); its key is not: a step can tell whether a name is cached by whether the
    search functions run for it (R60a-3), so a step's first ``"x".encode("latin-1")`` is a
    change (R59a-4's false UNKNOWN, kept)."""
    if type(v) is not codecs.CodecInfo:
        return False
    std = vars(encodings).get("_cache")
    own = own_dict(v)
    if type(std) is not dict or not any(x is v for x in dict.values(std)) or own is None \
            or not set(dict.keys(own)) <= _CODEC_FIELDS:
        return False
    return all((type(x) is str) if k == "name" else (type(x) is bool)
               if k == "_is_text_encoding" else _codec_part(x) for k, x in dict.items(own)) \
        and all(_codec_part(x) for x in tuple.__iter__(v))


def registry_texts(from_user: Callable[[Any], bool]) -> dict[str, str]:
    """The exit callbacks (each function with its parts and its arguments, in the order they
    run; :func:`_callback_text`), the codec registry (each search function, each cached
    ``CodecInfo`` by identity and all it holds, each error handler; of an entry as
    ``encodings`` made it only the key, :func:`_standard_codec`) and the audit hooks added since
    :func:`watch_audit_hooks` (none, or unreadable). ``from_user``: a value is the user's
    code. A registry whose layout was not found is unreadable."""
    out = {}
    if _ATEXIT_OFFSET is None:
        out[ATEXIT] = UNREADABLE + "atexit's callbacks could not be located"
    else:
        imported: dict[int, list[str]] = {}     # each import's registration matches one slot
        for name, func in _IMPORT_REGISTERED:
            imported.setdefault(id(func), []).append(name)
        # (no watch_atexit in this process: the tests' in-process captures, where pytest's
        # own callbacks are there before any test; every one is taken for a library's)
        libraries = library_callbacks()
        out[ATEXIT] = UNREADABLE + _EXIT_REACHED[0] if _EXIT_REACHED else \
            CALLBACK_SEP.join(_callback_text(*s, from_user, imported, libraries)
                              for s in _atexit_slots(_INTERP, _ATEXIT_OFFSET))
    if _CODECS is None:
        out[CODECS] = UNREADABLE + "the codec registry could not be located"
    else:
        path, cache, errors = _CODECS
        out[CODECS] = repr((
            [f"{_ident(f)}:{deep_text(f)}" for f in list.__iter__(path)],
            # every key (a step can tell a cached one by whether the search functions run:
            # R60a-3); a standard entry's value is left out (a later lookup makes its equal)
            sorted((key_text(k), f"{_ident(v)}:<standard>" if _standard_codec(v)
                    else f"{_ident(v)}:{deep_text(v)}") for k, v in list(dict.items(cache))),
            sorted((key_text(k), f"{_ident(v)}:{deep_text(v)}")
                   for k, v in list(dict.items(errors)))))
    if _AUDIT_ADDED:
        out[AUDIT] = UNREADABLE + f"{len(_AUDIT_ADDED)} audit hook(s) added (sys.addaudithook)"
    elif _GC_READS:
        out[AUDIT] = UNREADABLE + (
            f"{_GC_READS[0]}: the train file reaches the interpreter's objects through "
            f"gc.get_referrers / get_objects / get_referents ({len(_GC_READS)} call(s)), "
            "which reach state held in C that the fingerprint does not compare; drop the call "
            "from the train file")
    else:
        out[AUDIT] = ""
    return out
