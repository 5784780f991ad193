"""Adversarial round 2 (rejected, kept): the plan redeclares the spec's real input ``x`` with
domain ``positive`` (a raw INPUT node, same name and kind). proofs/smt.py keys inputs by kind and
name only, so both nodes are one z3 constant; its premises are those of the node encoded first
(the spec's, ``real``), so ``maximum(x, 0) == x`` stays sat and a forged smt step is rejected.
If the plan's node were encoded first, ``x > 0`` would constrain the spec's ``x`` too."""
from spec_lang import SGD, Dim, Mesh, Plan, Spec, Tensor, ops, real
from spec_lang.term import DimSpec, Op, term

B = Dim("B", 4)


def loss(p, d):
    return ops.sum(d["x"] * p["w"])


def plan_loss(p, d):
    pos = Tensor(term(Op.INPUT, (), ("x", "data", "positive"), (DimSpec("B"),)))
    relu = ops.stop_gradient(ops.maximum(pos, pos * 0))        # = x where x > 0
    return ops.sum((relu + d["x"] - ops.stop_gradient(d["x"])) * p["w"])


spec = Spec(params={"w": (B,)}, data={"x": real(B)}, forward=loss, optimizer=SGD())
plan = Plan(mesh=Mesh(dp=1), forward=plan_loss)
