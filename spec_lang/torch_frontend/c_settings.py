"""Settings the interpreter or the OS process keeps in C, read for the step-state fingerprint
(:mod:`spec_lang.torch_frontend.process_state`): a step can set one and a later step read it
(adversarial findings R59a-1, R59a-3, R59c-3, R60b-6, R60b-10, R60c-3).

Every reader is bound when this module is imported, before the train file runs (the capture
child imports it through :mod:`spec_lang.torch_frontend.c_registries` first): a train file
that rebinds ``gc.get_debug``, ``os.sched_getscheduler``, ``ctypes.CDLL`` or any other reader
at import would otherwise hand the fingerprint a constant while its step reads the setting
through the original (R60c-4, R60d-4; the R32-2 family). The C functions are taken from the
C modules (``_signal``, ``_locale``, ``_thread``, ``_socket``, ``_tracemalloc``), not from
their Python wrappers, whose module globals the train file could also rebind.
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
from ctypes import (CDLL, POINTER, byref, c_char_p, c_int, c_ulong, create_string_buffer,
                    get_errno, memset)
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

# prctl(2) options read back as the call's result: timer slack (R60b-10), dumpable, keepcaps,
# no_new_privs, the transparent huge pages switch; and through a pointer: the parent-death
# signal, child subreaper, TSC access (an int) and the thread's name (16 bytes: R60c-3)
_PRCTL_GETS = (30, 3, 7, 39, 42)
_PRCTL_INTS = (2, 37, 25)
_PR_GET_NAME = 16
try:
    _LIBC: Any = CDLL(None)     # (no use_errno: ctypes' private errno stays as read)
    _PRCTL: Any = _LIBC.prctl
    _PRCTL.restype = c_int
except (OSError, AttributeError):
    _LIBC = _PRCTL = None
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
    the C library's environment (``os.putenv``: R59c-3), every signal's disposition as the C
    library holds it (``faulthandler.register``: R60b-5) and the open file descriptors (R60b-8).
    ``getitimer``'s time left is not read (it runs down between two fingerprints), nor a
    descriptor's offset (a step that prints or logs moves it).

    Returns:
        ``{SETTINGS: text}``, one text for all of them (a ``"?"`` part: not readable here)."""
    hooks = _ASYNCGEN_HOOKS()
    texts: list[Any] = [deep_text(hooks.firstiter), deep_text(hooks.finalizer),
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
        texts += [_SCHED[0](0), _SCHED[1](0).sched_priority]
    texts.append(_prctl())
    texts += [_GETRLIMIT(r) for r in _RLIMITS]
    texts += [_TRACING[0](), _TRACING[1]()] if _TRACING is not None else ["?", "?"]
    texts += [get_errno(), _c_environ(), _signal_actions(), _descriptors()]
    return {SETTINGS: repr(texts)}


def _prctl() -> list[Any] | str:
    """The process settings ``prctl(2)`` returns (Linux; else ``"?"``)."""
    if _PRCTL is None:
        return "?"
    zero = c_ulong(0)
    out: list[Any] = [_PRCTL(c_int(o), zero, zero, zero, zero) for o in _PRCTL_GETS]
    for o in _PRCTL_INTS:
        v = c_int(0)
        out.append((_PRCTL(c_int(o), byref(v), zero, zero, zero), v.value))
    name = create_string_buffer(17)
    out.append((_PRCTL(c_int(_PR_GET_NAME), name, zero, zero, zero), name.value))
    return out


def _c_environ() -> str:
    """A digest of the C library's environment (``environ``): ``os.putenv`` changes it and
    not ``os.environ``, and torch's C++ code reads it with ``getenv``."""
    try:
        if _LIBC is None:
            return "?"
        env = POINTER(c_char_p).in_dll(_LIBC, "environ")
    except (OSError, ValueError):
        return "?"
    out, i = [], 0
    while env[i] is not None:
        out.append(env[i])
        i += 1
    return _SHA1(repr(sorted(out)).encode()).hexdigest()


def _signal_actions() -> str:
    """A digest of every signal's ``struct sigaction`` (handler, mask, flags) as ``sigaction(2)``
    reads it back: a handler installed in C, which ``signal.getsignal`` does not show
    (``faulthandler.register`` / ``unregister`` as a step counter: R60b-5). Addresses of C
    handlers are this process's; the digest is compared within it (before and after a step)."""
    if _SIGACTION is None:
        return "?"
    buf = create_string_buffer(_SIGACTION_BYTES)
    out = []
    for sig in range(1, _NSIG):
        _MEMSET(buf, 0, _SIGACTION_BYTES)
        ok = _SIGACTION(c_int(sig), None, buf) == 0   # (glibc's reserved 32, 33: EINVAL)
        raw = buf.raw
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
