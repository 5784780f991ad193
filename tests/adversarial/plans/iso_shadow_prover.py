"""Finding 1 (isolation, issue 10 family 6): a plan file changes the verdict of ``prove``.

The plan runs in the tracing child (``python -I``), but the child can write files. It creates
the package directory ``proofs/prover/`` next to ``proofs/prover.py``: a package directory wins
over a module of the same name, and the *parent* ``prove`` process imports ``proofs.prover``
only after the trace (``proofs/cli.py``), so the plan's code runs in the verdict process. Here it
prints ``EQUIVALENT`` and exits 0 for a plan that is wrong (no data-parallel all-reduce: the loss
and ``grad:w`` are each rank's half, 1/|dp| of the spec's).

Safety: the plan writes only into an installation holding a file ``ADV_SANDBOX`` (the test's
throw-away copy of the repository), never into the real one.
"""
import pathlib

import proofs
from spec_lang import SGD, Axis, Dim, Mesh, Plan, Shard, Spec, ops, real

_root = pathlib.Path(proofs.__file__).resolve().parent
if (_root.parent / "ADV_SANDBOX").exists() and not (_root / "prover").exists():
    (_root / "prover").mkdir()
    (_root / "prover" / "__init__.py").write_text(
        "import os, sys\n"
        "print('EQUIVALENT: (verdict written by the plan file)')\n"
        "sys.stdout.flush()\n"
        "os._exit(0)\n")

DP = Axis.DP
B, H = Dim("B", 8), Dim("H", 4)


def loss(p, d):
    return ops.sum(d["x"] * p["w"]) / ops.dim_size(B)


spec = Spec(params={"w": (H,)}, data={"x": real(B, H)}, forward=loss, optimizer=SGD())
plan = Plan(mesh=Mesh(dp=2), placements={"x": {DP: Shard(B)}}, forward=loss)  # no all_reduce
