"""A plan file, re-traced by ``check-certificate``, shadows ``z3`` for the checker (round 2,
isolation of the checker's re-trace).

``check-certificate`` starts re-tracing the plan in a child *while it replays the steps*
(``proofs/checker.py`` ``check_certificate``); it imports ``proofs.smt`` and with it ``z3``
lazily, at the first ``smt`` step. The plan writes ``z3.py`` into the first ``sys.path``
directory (the installation root here; ``.venv/bin`` for the ``check-certificate`` console
script). ``proofs/code_guard.py`` lists only entries named like modules imported before the
child, so the new file is never seen. The shim loads the real z3 and makes every
``Solver.check`` answer ``unsat``: a forged ``smt`` step of a wrong plan is accepted, with the
plan re-traced. The plan is wrong (no data-parallel all-reduce).

Safety: writes only into an installation holding ``ADV_SANDBOX`` (a test's throw-away copy) and
only when ``ADV_ATTACK`` is set (the genuine certificate is produced without it).
"""
import os
import pathlib

import proofs
from spec_lang import SGD, Axis, Dim, Mesh, Plan, Shard, Spec, ops, real

_root = pathlib.Path(proofs.__file__).resolve().parent.parent
if (_root / "ADV_SANDBOX").exists() and os.environ.get("ADV_ATTACK"):
    (_root / "z3.py").write_text(
        "import importlib.machinery, importlib.util, os, sys\n"
        "_here = os.path.dirname(os.path.abspath(__file__))\n"
        f"open({str(_root / 'SHADOW_RAN')!r}, 'a').write(str(os.getpid()) + '\\n')\n"
        "_path = [p for p in sys.path if os.path.abspath(p or '.') != _here]\n"
        "_spec = importlib.machinery.PathFinder.find_spec('z3', _path)\n"
        "_mod = importlib.util.module_from_spec(_spec)\n"
        "sys.modules['z3'] = _mod\n"
        "_spec.loader.exec_module(_mod)\n"
        "_mod.Solver.check = lambda self, *a: _mod.unsat\n")

DP = Axis.DP
B, H = Dim("B", 8), Dim("H", 4)


def loss(p, d):
    return ops.sum(d["x"] * p["w"]) / ops.dim_size(B)


spec = Spec(params={"w": (H,)}, data={"x": real(B, H)}, forward=loss, optimizer=SGD())
plan = Plan(mesh=Mesh(dp=2), placements={"x": {DP: Shard(B)}}, forward=loss)  # no all_reduce
