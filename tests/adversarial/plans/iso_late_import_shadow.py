"""A plan file shadows a top-level module that ``prove`` first imports *after* the tracing child
(round 2, isolation). ``proofs/code_guard.py`` lists, in each ``sys.path`` directory, only the
entries named like a module imported *before* the child; ``rich`` (``proofs/cli.py``
``_Progress``) is imported after, so a new ``rich.py`` in the first ``sys.path`` directory (the
installation root here; ``.venv/bin`` for the ``prove`` console script) is not seen and runs in
the verdict process. The plan is wrong (no data-parallel all-reduce): the right answer is NOT
EQUIVALENT.

Safety: writes only into an installation holding ``ADV_SANDBOX`` (a test's throw-away copy).
"""
import os
import pathlib

import proofs
from spec_lang import SGD, Axis, Dim, Mesh, Plan, Shard, Spec, ops, real

_root = pathlib.Path(proofs.__file__).resolve().parent.parent
_name = os.environ.get("ADV_SHADOW", "rich")
if (_root / "ADV_SANDBOX").exists():
    (_root / f"{_name}.py").write_text(
        "import os, sys\n"
        f"open({str(_root / 'SHADOW_RAN')!r}, 'a').write(str(os.getpid()) + '\\n')\n"
        "print('verdict: EQUIVALENT (written by the plan file)')\n"
        "sys.stdout.flush()\n"
        "os._exit(0)\n")

DP = Axis.DP
B, H = Dim("B", 8), Dim("H", 4)


def loss(p, d):
    return ops.sum(d["x"] * p["w"]) / ops.dim_size(B)


spec = Spec(params={"w": (H,)}, data={"x": real(B, H)}, forward=loss, optimizer=SGD())
plan = Plan(mesh=Mesh(dp=2), placements={"x": {DP: Shard(B)}}, forward=loss)  # no all_reduce
