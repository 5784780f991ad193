"""Round 8 (first difference, issue 12 item 2): UNKNOWN by design (exp(h + b) written as
exp(h) * exp(b), as tests/proofs/plans_unknown/exp_split.py) inside a loss that adds N = 4000
terms one at a time (``acc = acc + ...``: a sum nested 4000 deep). The walk's shape signature
flattens every nested sum into a fresh operand list and sorts it (``Matcher._operands`` and
``_sig_of``): quadratic in the depth, after the verdict is decided."""
from spec_lang import SGD, Dim, Mesh, Plan, Spec, ops, real

B, H = Dim("B", 2), Dim("H", 3)
N = 4000


def hidden(p, d):
    return ops.einsum(d["x"], p["w"], out=(B,))


def _acc(first, d):
    acc = first
    for k in range(1, N):
        acc = acc + d["t"] * (k + 1)
    return ops.sum(acc)


def spec_loss(p, d):
    return _acc(ops.exp(hidden(p, d) + d["b"]), d)


def plan_loss(p, d):
    return _acc(ops.exp(hidden(p, d)) * ops.exp(d["b"]), d)


spec = Spec(params={"w": (H,)}, data={"x": real(B, H), "b": real(B), "t": real(B)},
            forward=spec_loss, optimizer=SGD())
plan = Plan(mesh=Mesh(dp=1), placements={}, forward=plan_loss)
