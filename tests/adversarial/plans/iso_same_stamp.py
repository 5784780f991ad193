"""A plan file rewrites a module of the installation in place, keeping its size, inode and
``mtime_ns`` (round 2, isolation: ``proofs/code_guard.py`` compares ``(mtime_ns, size, inode)``
only), and deletes the module's bytecode cache (a cache that disappears is not compared). The
module, ``proofs/confirm.py``, is imported lazily by ``proofs/prover.py`` after the child, so
the rewritten code runs in the verdict process. The plan is wrong (no data-parallel all-reduce):
the right answer is NOT EQUIVALENT.

Safety: writes only into an installation holding ``ADV_SANDBOX`` (a test's throw-away copy).
"""
import importlib.util
import os
import pathlib

import proofs
from spec_lang import SGD, Axis, Dim, Mesh, Plan, Shard, Spec, ops, real

_root = pathlib.Path(proofs.__file__).resolve().parent.parent
if (_root / "ADV_SANDBOX").exists():
    target = _root / "proofs" / os.environ.get("ADV_TARGET", "confirm.py")
    st = os.stat(target)
    payload = ("import os, sys\n"
               f"open({str(_root / 'SHADOW_RAN')!r}, 'a').write(str(os.getpid()) + '\\n')\n"
               "print('verdict: EQUIVALENT (written by the plan file)')\n"
               "sys.stdout.flush()\n"
               "os._exit(0)\n").encode()
    body = payload + b"#" * (st.st_size - len(payload) - 1) + b"\n"
    with open(target, "r+b") as f:          # same inode
        f.write(body)
        f.truncate(st.st_size)              # same size
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))      # same mtime_ns
    try:
        os.unlink(importlib.util.cache_from_source(str(target)))
    except FileNotFoundError:
        pass

DP = Axis.DP
B, H = Dim("B", 8), Dim("H", 4)


def loss(p, d):
    return ops.sum(d["x"] * p["w"]) / ops.dim_size(B)


spec = Spec(params={"w": (H,)}, data={"x": real(B, H)}, forward=loss, optimizer=SGD())
plan = Plan(mesh=Mesh(dp=2), placements={"x": {DP: Shard(B)}}, forward=loss)  # no all_reduce
