"""adv2 F1 (was a false EQUIVALENT, now a PlanError): a stage-held gradient averaged over the pp group (pp=2, one micro-batch).

Stage 0 holds w0, stage 1 holds w1 (same shape, (H, K)). reduce_grads all-reduces every gradient
with op avg over 'pp'. On real hardware the pp group's all-reduce averages stage 0's buffer (grad
w0) with stage 1's buffer (grad w1): both stages step with (g0 + g1) / 2. It was EQUIVALENT
because the composed per-micro-batch program made g0 invariant over pp; now a PlanError.
"""
from spec_lang import SGD, Axis, Dim, Mesh, Plan, Spec, all_reduce, ops, real
from spec_lang.pipeline import Pipeline, stage
from spec_lang.schedules import gpipe

PP = Axis.PP
B, H, K = Dim("B", 2), Dim("H", 4), Dim("K", 4)


def body0(p, x):
    return ops.tanh(ops.einsum(x, p["w0"], out=(B, K)))


def body1(p, h, y):
    return ops.sum(ops.pow(ops.einsum(h, p["w1"], out=(B, H)) - y, 2))


spec = Spec(params={"w0": (H, K), "w1": (H, K)}, data={"x": real(B, H), "y": real(B, H)},
            forward=lambda p, d: body1(p, body0(p, d["x"]), d["y"]), optimizer=SGD())


def s0(p, d, io):
    io.send(body0(p, d["x"]))


def s1(p, d, io):
    return body1(p, io.recv(), d["y"])


pipe = Pipeline([stage(s0, ["w0"]), stage(s1, ["w1"])], schedule=gpipe(2, 1))
plan = Plan(mesh=Mesh(pp=2), forward=pipe.forward, schedule=pipe,
            reduce_grads=lambda name, g: all_reduce(g, PP, "avg"))   # the wrong group
