"""A plan file drops ``proofs/certificate.schema.json`` into the installation (round 2,
isolation: a data file of the checker's trusted base). ``proofs/checker.py`` reads the first of
``SCHEMA_PATHS`` that exists, ``proofs/certificate.schema.json`` before
``docs/certificate.schema.json``; ``proofs/code_guard.py`` lists only ``.py`` files and
directories, so the new file is not seen, and every later ``check-certificate`` validates with
the plan's schema (here: any JSON object). The plan itself is a correct tiny plan.

Safety: writes only into an installation holding ``ADV_SANDBOX`` (a test's throw-away copy).
"""
import pathlib

import proofs
from spec_lang import SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, ops, real

_root = pathlib.Path(proofs.__file__).resolve().parent.parent
if (_root / "ADV_SANDBOX").exists():
    (_root / "proofs" / "certificate.schema.json").write_text('{"type": "object"}')

DP = Axis.DP
B, H = Dim("B", 8), Dim("H", 4)


def loss(p, d):
    return ops.sum(d["x"] * p["w"]) / ops.dim_size(B)


spec = Spec(params={"w": (H,)}, data={"x": real(B, H)}, forward=loss, optimizer=SGD())
plan = Plan(mesh=Mesh(dp=2), placements={"x": {DP: Shard(B)}},
            forward=lambda p, d: Loss(backward=loss(p, d), report=all_reduce(loss(p, d), DP)),
            reduce_grads=lambda name, g: all_reduce(g, DP, "sum"))
