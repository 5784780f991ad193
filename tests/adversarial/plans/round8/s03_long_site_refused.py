"""Round 8 (sites, issue 12 item 2): a correct plan (tests/proofs/plans/tiny_dp_tp.py) whose
model function is compiled under a 4100-character file name (a long path: Linux allows 4095
bytes, and the site adds ":line"). ``problem_data._sites`` rejects a site string longer than
``MAX_SITE_CHARS`` = 4096, so a messages-only field turns an EQUIVALENT plan into an error:
"sites never change a verdict" does not hold."""

from spec_lang import SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, ops, real
from spec_lang import copy_to_tp_region, reduce_from_tp_region

DP, TP = Axis.DP, Axis.TP
B, H, F = Dim("B", 8), Dim("H", 4), Dim("F", 8)

_SRC = '''
def model(p, d, enter=lambda x: x, exit_=lambda x: x):
    h = ops.silu(ops.einsum(enter(d["x"]), p["w1"], out=(B, F)))
    y = exit_(ops.einsum(h, p["w2"], out=(B, H)))
    return ops.sum(y * y) / ops.dim_size(B)
'''
_LONG = "/" + "/".join(["d" * 200] * 20) + "/model.py"     # 4029 + ... characters
_LONG = _LONG + "x" * (4100 - len(_LONG))
_ns = {"ops": ops, "B": B, "H": H, "F": F}
exec(compile(_SRC, _LONG, "exec"), _ns)  # noqa: S102 -- the long co_filename
model = _ns["model"]

spec = Spec(params={"w1": (H, F), "w2": (F, H)}, data={"x": real(B, H)},
            forward=model, optimizer=SGD())


def forward(p, d):
    loss = model(p, d, lambda x: copy_to_tp_region(x, TP), lambda y: reduce_from_tp_region(y, TP))
    return Loss(backward=loss, report=all_reduce(loss, DP))  # the logged loss is global


plan = Plan(mesh=Mesh(dp=2, tp=2),
            placements={"w1": {TP: Shard(F)}, "w2": {TP: Shard(F)}, "x": {DP: Shard(B)}},
            forward=forward,
            reduce_grads=lambda name, g: all_reduce(g, DP, "sum"))
