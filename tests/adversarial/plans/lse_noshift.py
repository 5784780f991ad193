"""Finding 3: a correct plan (log-sum-exp without the max shift: equal over the reals) that a
forged NOT EQUIVALENT certificate "refutes" with the `exclude` edge case (-1e6 in a real input:
exp overflows to inf in the plan, the spec stays finite)."""
from spec_lang import SGD, Dim, Mesh, Plan, Spec, ops, real
B, V = Dim("B", 2), Dim("V", 4)
def logits(p, d): return -d["x"] * p["w"]
spec = Spec(params={"w": (V,)}, data={"x": real(B, V)},
            forward=lambda p, d: ops.sum(ops.logsumexp(logits(p, d), V)) / ops.dim_size(B), optimizer=SGD())
plan = Plan(mesh=Mesh(dp=1),
            forward=lambda p, d: ops.sum(ops.log(ops.sum(ops.exp(logits(p, d)), V))) / ops.dim_size(B))
