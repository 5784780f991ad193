"""Unit forms of rounds 60a-60c run in a fresh interpreter on this tree: each leaves state in C
behind (an audit hook, a wrapped ``atexit.register``, a cached ``Struct``, a thread name), so
none runs in the test process.

:data:`FLAG_PROBE` takes each wrong plan's ``_flag`` (step 1: False, leaving its state; step 2:
True) between two process-state fingerprints (every process-wide entry, the C settings and
registries, the audit record; the globals of the modules named), all in one child, each in a
namespace of its own, after the line ``IMPORTS``.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

TREE = Path(__file__).resolve().parents[2]

FLAG_PROBE = """
import json, sys
from spec_lang.torch_frontend import c_registries as C
from spec_lang.torch_frontend.process_state import _process_state
from spec_lang.torch_frontend.step_state import state_changes
C.watch_audit_hooks()
out = {}
for name, (src, mods) in json.loads(sys.argv[1]).items():
    ns = {}
    exec("IMPORTS\\n" + src, ns)
    s0 = _process_state(modules=mods)
    a = ns["_flag"]()
    s1 = _process_state(modules=mods)
    b = ns["_flag"]()
    out[name] = {"flag1": bool(a), "flag2": bool(b), "changes": sorted(state_changes(s0, s1))}
print(json.dumps(out))
"""


# One server per test process: an interpreter that has imported torch (and numpy), nothing of
# this tree, and forks a child per probe, so a probe costs the fork, not torch's import (about
# 1.5 CPU s each, a tenth of the suite's rounds 60a-63a). A probe runs as ``python -c src args``
# would, in the forked child: its own ``sys.argv``, its stdout and stderr, its exit status; the
# child runs the exit handlers and ends with ``os._exit`` once its output is flushed.
_SERVER = r"""
import atexit, json, os, sys, traceback
import numpy, torch
inp = sys.stdin
out = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
for line in inp:
    req = json.loads(line)
    r_out, w_out = os.pipe()
    r_err, w_err = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r_out); os.close(r_err)
        os.dup2(w_out, 1); os.dup2(w_err, 2)
        sys.stdout = os.fdopen(1, "w"); sys.stderr = os.fdopen(2, "w")
        sys.stdin = open(os.devnull)
        sys.argv = ["-c", *req["args"]]
        code = 0
        try:
            exec(compile(req["src"], "<string>", "exec"), {"__name__": "__main__"})
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:
            traceback.print_exc()
            code = 1
        try:     # (exit handlers run, as at a fresh interpreter's exit: temporary
            atexit._run_exitfuncs()     # directories a probe made are removed)
        except BaseException:
            pass
        sys.stdout.flush(); sys.stderr.flush()
        os._exit(code)
    os.close(w_out); os.close(w_err)
    import threading
    got = {}
    def drain(fd, k):
        with os.fdopen(fd, "rb") as f:
            got[k] = f.read().decode("utf-8", "replace")
    t = threading.Thread(target=drain, args=(r_err, "stderr")); t.start()
    drain(r_out, "stdout"); t.join()
    _, status = os.waitpid(pid, 0)
    got["rc"] = os.waitstatus_to_exitcode(status)
    out.write(json.dumps(got) + "\n"); out.flush()
"""
_server: list[subprocess.Popen] = []


def _probe_server() -> subprocess.Popen:
    if not _server or _server[0].poll() is not None:
        # the probes' temporary files (a snippet's ``mkdtemp``, a plan's helper module) in a
        # directory of the server's own, removed with it: none is left in the system's
        tmp = tempfile.mkdtemp(prefix="shardproof-probes-")
        env = {**os.environ, "PYTHONPATH": str(TREE), "TMPDIR": tmp}
        _server[:] = [subprocess.Popen([sys.executable, "-c", _SERVER], cwd=TREE, env=env,
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       text=True)]
        atexit.register(_stop_server, _server[0], tmp)
    return _server[0]


def _stop_server(proc: subprocess.Popen, tmp: str) -> None:
    proc.stdin.close()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
    shutil.rmtree(tmp, ignore_errors=True)


def run_child(src: str, *args: str) -> dict:
    """Run ``src`` as ``python -c src args`` would on this tree, in a child forked from the
    probe server; its last stdout line, as JSON.

    Raises:
        subprocess.CalledProcessError: the child failed (its stderr attached).
        subprocess.TimeoutExpired: no answer within 600 s (the server is killed).
        RuntimeError: the server itself exited.
    """
    server = _probe_server()
    server.stdin.write(json.dumps({"src": src, "args": list(args)}) + "\n")
    server.stdin.flush()
    done = threading.Timer(600, server.kill)
    done.start()
    try:
        line = server.stdout.readline()
    finally:
        done.cancel()
    if not line and server.poll() == -9:
        raise subprocess.TimeoutExpired([sys.executable, "-c", "<probe>"], 600)
    if not line:
        raise RuntimeError(f"the probe server exited ({server.poll()}): see its stderr")
    got = json.loads(line)
    if got["rc"] != 0:
        raise subprocess.CalledProcessError(got["rc"], [sys.executable, "-c", "<probe>"],
                                            got["stdout"], got["stderr"])
    return json.loads(got["stdout"].strip().splitlines()[-1])


def flag_src(plan: Path) -> str:
    """The plan's code from its ``H = {}`` line to ``parallelize`` (its ``_flag``, helpers)."""
    text = plan.read_text()
    return text[text.index("\nH = {}\n"):text.index("\ndef parallelize")]


def probe_flags(flags: dict, imports: str) -> dict:
    """:data:`FLAG_PROBE` of ``flags`` (name -> (source, modules)) after ``imports``."""
    return run_child(FLAG_PROBE.replace("IMPORTS", imports), json.dumps(flags))


# rounds 61b-61d: each plan's code (its import-time patch and its flag) exec'd under a file name
# of its own, then the flag between two fingerprints with a collection after step 1
PATCH_PROBE = """
import gc, json, sys
from spec_lang.torch_frontend import c_registries as C
from spec_lang.torch_frontend.op_guard import take_baseline
take_baseline()     # (as the capture does, before the train file runs: library_class)
C.watch_atexit()    # (and atexit's wrappers: R63e-1)
from spec_lang.torch_frontend.process_state import _process_state
from spec_lang.torch_frontend.step_state import state_changes
C.watch_audit_hooks()
out = {}
for name, src in json.loads(sys.argv[1]).items():
    ns = {}
    exec(compile("import ctypes, gc, logging, os, signal, sys, torch\\n" + src,
                 f"/tmp/ROUND_{name}.py", "exec"), ns)
    s0 = _process_state(modules=[])
    a = ns["_flag"]()
    gc.collect()
    s1 = _process_state(modules=[])
    b = ns["_flag"]()
    out[name] = {"flag1": bool(a), "flag2": bool(b), "changes": sorted(state_changes(s0, s1))}
print(json.dumps(out))
"""


def plan_flag_src(plan: Path, patch_call: str | None = None) -> str:
    """:func:`flag_src` of ``plan``; without its import-time patch when ``patch_call`` (the
    line that applies it, e.g. ``"PATCH()"``) is given: the unpatched control."""
    src = flag_src(plan)
    return src if patch_call is None else src.replace(f"\n{patch_call}\n", "\n")


def patch_flags(round_name: str, flags: dict[str, str]) -> dict:
    """:data:`PATCH_PROBE` of ``flags`` (name -> source) in one child, its code compiled as
    ``/tmp/<round_name>_<name>.py``."""
    return run_child(PATCH_PROBE.replace("ROUND", round_name), json.dumps(flags))
