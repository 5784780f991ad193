"""Round 2, z3 input names: the spec's data input is named ``a:b``; the plan uses a raw INPUT
node named ``b`` of kind ``data:a``. proofs/smt.py keys inputs ``in:<kind>:<name>[idx]``, so both
are ``in:data:a:b[i]`` to z3, while the evaluator (and the meaning) keeps them apart."""
from spec_lang import SGD, Dim, Mesh, Plan, Spec, Tensor, ops, real
from spec_lang.term import DimSpec, Op, term

B = Dim("B", 4)


def loss(p, d):
    return ops.sum(d["a:b"] * p["w"])


def plan_loss(p, d):
    other = Tensor(term(Op.INPUT, (), ("b", "data:a", "real"), (DimSpec("B"),)))
    return ops.sum(other * p["w"]) + ops.sum(d["a:b"]) * 0


spec = Spec(params={"w": (B,)}, data={"a:b": real(B)}, forward=loss, optimizer=SGD())
plan = Plan(mesh=Mesh(dp=1), forward=plan_loss)
