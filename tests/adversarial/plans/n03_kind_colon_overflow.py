"""Adversarial round 2 (finding R2-10): R2-7's namespace collision decides ``prove`` itself.

The spec's loss is ``sum_B x_{a:b} w``; the plan's is ``sum_B x_b w`` with ``x_b`` a raw INPUT
named ``b`` of kind ``data:a``: an input unrelated to the spec's (the evaluator draws it apart),
so the plan is wrong over the reals. Both add ``0 * sum_B exp(1000 (x^2 + 1)) w``: 0 over the
reals, NaN in float64 (and in the gradient), so every replay overflows and is inconclusive
(round 2 item 3), the refuter is silent, and the z3 fallback, which keys both inputs
``in:data:a:b[i]`` (proofs/smt.py), proves every goal: ``prove`` says EQUIVALENT, exit 0, and
its self-check agrees."""
from spec_lang import SGD, Dim, Mesh, Plan, Spec, Tensor, ops, real
from spec_lang.term import DimSpec, Op, term

B = Dim("B", 4)


def junk(p, d):
    x = d["a:b"]
    return ops.sum(ops.exp((x * x + 1) * 1000) * p["w"]) * 0   # nan in float64 (and its gradient), 0 over R


def loss(p, d):
    return ops.sum(d["a:b"] * p["w"]) + junk(p, d)


def plan_loss(p, d):
    other = Tensor(term(Op.INPUT, (), ("b", "data:a", "real"), (DimSpec("B"),)))
    return ops.sum(other * p["w"]) + junk(p, d)


spec = Spec(params={"w": (B,)}, data={"a:b": real(B)}, forward=loss, optimizer=SGD())
plan = Plan(mesh=Mesh(dp=1), forward=plan_loss)
