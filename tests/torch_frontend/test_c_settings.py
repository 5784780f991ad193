"""The C settings of the step-state fingerprint (``spec_lang/torch_frontend/c_settings.py``) are
read through readers bound before the train file runs: a file that rebinds each reader in its
module to a constant at import still has every setting its step changes seen (R60d-4, the
R60c-4 family). Run in a fresh interpreter: the settings changed stay changed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# name: (the reader rebound to a constant, as a train file would at import; the change a step
# makes to the setting it reads)
_CASES = {
    "gc_debug": ("gc.get_debug = lambda: 0", "gc.set_debug(gc.DEBUG_UNCOLLECTABLE)"),
    "sigmask": ("signal.pthread_sigmask = lambda how, mask: set()",
                "_signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR2])"),
    "dlopen": ("sys.getdlopenflags = lambda: 2",
               "sys.setdlopenflags(os.RTLD_LAZY | os.RTLD_GLOBAL)"),
    "faulthandler": ("faulthandler.is_enabled = lambda: False", "faulthandler.enable()"),
    "stack_size": ("threading.stack_size = _thread.stack_size = lambda *a: 0",
                   "_ORIG_STACK(1 << 20)"),
    "locale": ("locale.setlocale = _locale.setlocale = lambda *a: 'C'",
               "_ORIG_SETLOCALE(_locale.LC_NUMERIC, 'C.UTF-8')"),
    "socket_timeout": ("socket.getdefaulttimeout = _socket.getdefaulttimeout = lambda: None",
                       "socket.setdefaulttimeout(3.0)"),
    "priority": ("os.getpriority = lambda *a: 0",
                 "os.setpriority(os.PRIO_PROCESS, 0, os.getpriority(os.PRIO_PROCESS, 0) + 1)"),
    "rlimit": ("resource.getrlimit = lambda r: (-1, -1)",
               "_n = _ORIG_GETRLIMIT(resource.RLIMIT_NOFILE); "
               "resource.setrlimit(resource.RLIMIT_NOFILE, (_n[0] - 1, _n[1]))"),
    "tracemalloc": ("tracemalloc.get_traceback_limit = _tracemalloc.get_traceback_limit = "
                    "lambda: 1", "_tracemalloc.start(7); _tracemalloc.stop()"),
    "ctypes_errno": ("ctypes.get_errno = lambda: 0", "ctypes.set_errno(7)"),
    "sched": ("os.sched_getscheduler = lambda pid: 0",
              "os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))"),
    # a handler installed in C (R60b-5) and a descriptor left open (R60b-8), stop 61
    "faulthandler_register": ("os.listdir = lambda p: []", "faulthandler.register(signal.SIGUSR2)"),
    "fd_left_open": ("os.readlink = lambda p: ''",
                     "_fd = os.open(os.devnull, os.O_RDONLY); os.dup2(_fd, 777); os.close(_fd)"),
}

# every case in one child: rebind all readers first (the train file's import), then one
# fingerprint per change
_CHILD = """
import _locale, _signal, _socket, _thread, _tracemalloc, ctypes, faulthandler, gc, json, locale
import os, resource, signal, socket, sys, threading, tracemalloc
from spec_lang.torch_frontend.c_settings import SETTINGS, c_settings
_ORIG_STACK, _ORIG_SETLOCALE = _thread.stack_size, _locale.setlocale
_ORIG_GETRLIMIT = resource.getrlimit
stable = all(c_settings() == c_settings() for _ in range(20))
cases = json.loads(sys.argv[1])
for rebind, _ in cases.values():
    exec(rebind)
out = {"stable": stable}
for name, (_, change) in cases.items():
    before = c_settings()[SETTINGS]
    exec(change)
    out[name] = c_settings()[SETTINGS] != before
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def seen() -> dict[str, bool]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    got = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(_CASES)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300)
    assert got.returncode == 0, got.stderr[-2000:]
    return json.loads(got.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", sorted(_CASES))
def test_a_setting_is_seen_with_its_reader_rebound(seen: dict[str, bool], name: str) -> None:
    assert seen[name] is True, name


def test_the_settings_read_the_same_twice(seen: dict[str, bool]) -> None:
    # (glibc's sigaction copies stack bytes into the unused part of sa_mask: only the kernel's
    # 64 bits are read)
    assert seen["stable"] is True
