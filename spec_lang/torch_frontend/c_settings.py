"""Settings the interpreter or the OS process keeps in C, read for the step-state fingerprint
(:mod:`spec_lang.torch_frontend.process_state`): a step can set one and a later step read it
(adversarial findings R59a-1, R59a-3, R59c-3, R60b-6, R60b-10, R60c-3).

Every reader is bound when this module is imported, before the train file runs (the capture
child imports it through :mod:`spec_lang.torch_frontend.c_registries` first): a train file
that rebinds ``gc.get_debug``, ``os.sched_getscheduler``, ``ctypes.CDLL`` or any other reader
at import would otherwise hand the fingerprint a constant while its step reads the setting
through the original (R60c-4, R60d-4; the R32-2 family). The C functions are taken from the
C modules (``_signal``, ``_locale``, ``_thread``, ``_socket``, ``_tracemalloc``), not from
their Python wrappers, whose module globals the train file could also rebind. What the readers
return is read without a lookup the train file can change either (round 61a): ``prctl`` and
``sigaction`` write into a buffer made here and read back with ctypes' own ``_string_at``
(R61a-1: a descriptor on ``c_int.value``), their arguments are ctypes objects made here, the C
environment is read word by word from the ``environ`` variable's address (R61a-2: a
``POINTER(c_char_p)`` type seeded into ctypes' pointer cache; R61b-1: the cached pointer
class's ``__getitem__`` replaced), a struct sequence is read by ``tuple``'s own item access;
the builtins it calls are Python's own (``process_state.replaced_builtins``, R61a-3).
"""

from __future__ import annotations

import _locale
import _signal
import _thread
import faulthandler
import gc
import hashlib
import os
import sys
from ctypes import (CDLL, _string_at, addressof, c_int, c_ulong, c_void_p,
                    create_string_buffer, get_errno, memset, sizeof)
from typing import Any

from spec_lang.torch_frontend.value_text import deep_text

__all__ = ["SETTINGS", "c_settings"]

SETTINGS = "interpreter and process settings kept in C"

# the readers (R60d-4: every one bound here, not looked up when the fingerprint runs)
_ASYNCGEN_HOOKS = sys.get_asyncgen_hooks
_ORIGIN_DEPTH = sys.get_coroutine_origin_tracking_depth
_DLOPEN_FLAGS = sys.getdlopenflags
_SIGMASK = _signal.pthread_sigmask
_SIG_BLOCK = _signal.SIG_BLOCK
_GC_DEBUG = gc.get_debug
_FAULTHANDLER = faulthandler.is_enabled
_STACK_SIZE = _thread.stack_size
_WAKEUP_FD = _signal.set_wakeup_fd
_SETLOCALE = _locale.setlocale
_LOCALE_CATEGORIES = tuple(getattr(_locale, c) for c in (
    "LC_CTYPE", "LC_COLLATE", "LC_TIME", "LC_MONETARY", "LC_NUMERIC", "LC_MESSAGES")
    if hasattr(_locale, c))
_GETITIMER = _signal.getitimer
_ITEM = tuple.__getitem__       # (a struct sequence's fields: its type's attributes can change)
_ITIMERS = (_signal.ITIMER_REAL, _signal.ITIMER_VIRTUAL, _signal.ITIMER_PROF)
try:
    import _socket
    _SOCKET_TIMEOUT: Any = _socket.getdefaulttimeout
except ImportError:
    _SOCKET_TIMEOUT = None
_AFFINITY = getattr(os, "sched_getaffinity", None)
_PRIORITY = getattr(os, "getpriority", None)
_PRIO_PROCESS = getattr(os, "PRIO_PROCESS", 0)
_SCHED = (os.sched_getscheduler, os.sched_getparam) \
    if hasattr(os, "sched_getscheduler") else None
try:
    import resource
    _GETRLIMIT: Any = resource.getrlimit
    _RLIMITS = tuple(getattr(resource, r) for r in sorted(dir(resource))
                     if r.startswith("RLIMIT_"))
except ImportError:
    _GETRLIMIT, _RLIMITS = None, ()
try:
    import _tracemalloc
    _TRACING: Any = (_tracemalloc.is_tracing, _tracemalloc.get_traceback_limit)
except ImportError:
    _TRACING = None
_SHA1 = hashlib.sha1
_FROM_BYTES = int.from_bytes
_SPLIT = bytes.split

# prctl(2) options read back as the call's result: timer slack (R60b-10), dumpable, keepcaps,
# no_new_privs, the transparent huge pages switch; and through a pointer: the parent-death
# signal, child subreaper, TSC access (an int) and the thread's name (16 bytes: R60c-3)
_PRCTL_GETS = (30, 3, 7, 39, 42)
_PRCTL_INTS = (2, 37, 25)
_PR_GET_NAME = 16
try:
    _LIBC: Any = CDLL(None)     # (no use_errno: ctypes' private errno stays as read)
    _PRCTL: Any = _LIBC.prctl
    _PRCTL.restype = c_int      # (its result conversion is fixed now: _check_retval_ too)
except (OSError, AttributeError):
    _LIBC = _PRCTL = None
# the arguments and the buffer the calls fill, made now; read back by address
_ZERO = c_ulong(0)
_ARGS = {o: c_int(o) for o in (*_PRCTL_GETS, *_PRCTL_INTS, _PR_GET_NAME)}   # the options
_BUF = create_string_buffer(256)
_BUF_AT = addressof(_BUF)
# the C library's ``environ`` variable, by address: its entries are read word by word with
# ``_string_at`` (R61b-1: a ``POINTER(c_char_p)``'s item access is its class's ``__getitem__``,
# which the train file can replace on the cached pointer class)
_WORD = sizeof(c_void_p)
_ORDER = sys.byteorder
try:
    _ENVIRON_AT: Any = addressof(c_void_p.in_dll(_LIBC, "environ"))
except (OSError, ValueError, AttributeError, TypeError):
    _ENVIRON_AT = None
# glibc's ``struct sigaction`` on 64-bit Linux (x86-64, aarch64): the handler (8 bytes), a
# 1024-bit ``sa_mask`` of which the kernel fills the first 64 bits (glibc copies the rest from
# its stack: not read), ``int sa_flags`` at byte 136; elsewhere the dispositions read "?"
try:
    _SIGACTION: Any = _LIBC.sigaction \
        if sys.platform == "linux" and os.uname().machine in ("x86_64", "aarch64") else None
    _SIGACTION.restype = c_int
except AttributeError:
    _SIGACTION = None
_NSIG = 65                    # signals 1-64 (Linux: SIGRTMAX)
_SIGACTION_BYTES = 256        # more than the struct (152 bytes)
_SIGACTION_READ = ((0, 16), (136, 140))     # handler and the kernel's mask; the flags
_SIGNALS = {s: c_int(s) for s in range(1, _NSIG)}
_LISTDIR, _READLINK = os.listdir, os.readlink
_MEMSET = memset


def c_settings() -> dict[str, str]:
    """Settings the interpreter or the OS process keeps in C that a step can set and a later
    step read (R59a-1, R59a-3): the async generator hooks (with all they hold), the coroutine
    origin tracking depth, ``dlopen`` flags, the blocked signal mask, the collector's debug
    flags, ``faulthandler``, the signal wakeup descriptor, every locale category, the interval
    timers (armed or not, and their intervals), the default thread stack size and socket
    timeout, CPU affinity, the scheduling priority and policy (R60b-6), the ``prctl`` settings
    (R60b-10, R60c-3), the resource limits, ``tracemalloc``'s state, ctypes' private errno,
    the C library's environment (``os.putenv``: R59c-3, read by address: R61b-1), every signal's disposition as the C
    library holds it (``faulthandler.register``: R60b-5) and the open file descriptors (R60b-8).
    ``getitimer``'s time left is not read (it runs down between two fingerprints), nor a
    descriptor's offset (a step that prints or logs moves it).

    Returns:
        ``{SETTINGS: text}``, one text for all of them (a ``"?"`` part: not readable here)."""
    hooks = _ASYNCGEN_HOOKS()
    texts: list[Any] = [deep_text(_ITEM(hooks, 0)), deep_text(_ITEM(hooks, 1)),
                        _ORIGIN_DEPTH(), _DLOPEN_FLAGS(),
                        sorted(int(x) for x in _SIGMASK(_SIG_BLOCK, [])),
                        _GC_DEBUG(), _FAULTHANDLER(), _STACK_SIZE()]
    try:   # (the only way to read it: set and put back; the main thread only)
        fd = _WAKEUP_FD(-1)
        _WAKEUP_FD(fd)
        texts.append(fd)
    except ValueError:
        texts.append("?")
    texts += [_SETLOCALE(c) for c in _LOCALE_CATEGORIES]
    texts += [(bool(t[0]), t[1]) for t in (_GETITIMER(w) for w in _ITIMERS)]
    texts.append(_SOCKET_TIMEOUT() if _SOCKET_TIMEOUT is not None else None)
    texts.append(sorted(_AFFINITY(0)) if _AFFINITY is not None else None)
    texts.append(_PRIORITY(_PRIO_PROCESS, 0) if _PRIORITY is not None else None)
    if _SCHED is not None:
        texts += [_SCHED[0](0), _ITEM(_SCHED[1](0), 0)]
    texts.append(_prctl())
    texts += [_GETRLIMIT(r) for r in _RLIMITS]
    texts += [_TRACING[0](), _TRACING[1]()] if _TRACING is not None else ["?", "?"]
    texts += [get_errno(), _c_environ(), _signal_actions(), _descriptors()]
    return {SETTINGS: repr(texts)}


def _prctl() -> list[Any] | str:
    """The process settings ``prctl(2)`` returns (Linux; else ``"?"``): the pointer results
    written into :data:`_BUF` and read back by address (R61a-1)."""
    if _PRCTL is None:
        return "?"
    z = _ZERO
    out: list[Any] = [_PRCTL(_ARGS[o], z, z, z, z) for o in _PRCTL_GETS]
    for o in _PRCTL_INTS:
        _MEMSET(_BUF_AT, 0, 8)
        rc = _PRCTL(_ARGS[o], _BUF, z, z, z)
        out.append((rc, _FROM_BYTES(_string_at(_BUF_AT, 4), "little", signed=True)))
    _MEMSET(_BUF_AT, 0, 32)
    rc = _PRCTL(_ARGS[_PR_GET_NAME], _BUF, z, z, z)
    out.append((rc, _SPLIT(_string_at(_BUF_AT, 17), b"\0", 1)[0]))
    return out


def _c_environ() -> str:
    """A digest of the C library's environment (``environ``): ``os.putenv`` changes it and
    not ``os.environ``, and torch's C++ code reads it with ``getenv``."""
    if _ENVIRON_AT is None:
        return "?"
    word = _WORD
    base = _FROM_BYTES(_string_at(_ENVIRON_AT, word), _ORDER)
    out: list[bytes] = []
    while base:
        entry = _FROM_BYTES(_string_at(base + word * len(out), word), _ORDER)
        if not entry:
            break
        out.append(_string_at(entry, -1))
    return _SHA1(repr(sorted(out)).encode()).hexdigest()


def _signal_actions() -> str:
    """A digest of every signal's ``struct sigaction`` (handler, mask, flags) as ``sigaction(2)``
    reads it back: a handler installed in C, which ``signal.getsignal`` does not show
    (``faulthandler.register`` / ``unregister`` as a step counter: R60b-5). Addresses of C
    handlers are this process's; the digest is compared within it (before and after a step)."""
    if _SIGACTION is None:
        return "?"
    out = []
    for sig in range(1, _NSIG):
        _MEMSET(_BUF_AT, 0, _SIGACTION_BYTES)
        ok = _SIGACTION(_SIGNALS[sig], None, _BUF) == 0   # (glibc's reserved 32, 33: EINVAL)
        raw = _string_at(_BUF_AT, _SIGACTION_BYTES)
        out.append(b"".join(raw[a:b] for a, b in _SIGACTION_READ) if ok else b"-")
    return _SHA1(b"|".join(out)).hexdigest()


def _descriptors() -> list[tuple[int, str]] | str:
    """The open file descriptors and what each refers to (``/proc/self/fd``; elsewhere
    ``"?"``): a descriptor a step leaves open is a counter the next step can find (R60b-8)."""
    try:
        fds = sorted(int(x) for x in _LISTDIR("/proc/self/fd"))
    except (OSError, ValueError):
        return "?"
    out = []
    for fd in fds:
        try:
            out.append((fd, _READLINK(f"/proc/self/fd/{fd}")))
        except OSError:       # the listing's own descriptor, closed again
            continue
    return out
