"""Unit forms of rounds 60a-60c run in a fresh interpreter on this tree: each leaves state in C
behind (an audit hook, a wrapped ``atexit.register``, a cached ``Struct``, a thread name), so
none runs in the test process.

:data:`FLAG_PROBE` takes each wrong plan's ``_flag`` (step 1: False, leaving its state; step 2:
True) between two process-state fingerprints (every process-wide entry, the C settings and
registries, the audit record; the globals of the modules named), all in one child, each in a
namespace of its own, after the line ``IMPORTS``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
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


def run_child(src: str, *args: str) -> dict:
    """Run ``src`` (``python -c``, with ``args``) on this tree; its last stdout line, as JSON.

    Raises:
        subprocess.CalledProcessError: the child failed.
        subprocess.TimeoutExpired: after 600 s.
    """
    env = {**os.environ, "PYTHONPATH": str(TREE)}
    out = subprocess.run([sys.executable, "-c", src, *args], cwd=TREE, env=env,
                         capture_output=True, text=True, check=True, timeout=600).stdout
    return json.loads(out.strip().splitlines()[-1])


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
