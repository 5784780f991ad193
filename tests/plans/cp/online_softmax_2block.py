"""Online softmax over two key blocks (ring / flash attention's rescaling) vs one global max.

Spec: attention of queries q (S, H) over two key/value blocks (T0, T1), softmax with the global
stop-gradient max M = max(max_T0 s0, max_T1 s1): out = (e0 v0 + e1 v1) / (sum e0 + sum e1),
e_j = exp(s_j - M). Plan: the online-softmax recurrence of ring attention: running max
m1 = max s0, m2 = max(m1, max s1), running sums rescaled by exp(m1 - m2).
The block decomposition of the key dim is given (two dims), so this proves the rescaling only.
"""

from spec_lang import SGD, Dim, Mesh, Plan, Spec, ops, real

S, H, E, T0, T1 = Dim("S", 4), Dim("H", 3), Dim("E", 2), Dim("T0", 4), Dim("T1", 4)


def scores(p):
    return (ops.einsum(p["q"], p["k0"], out=(S, T0)), ops.einsum(p["q"], p["k1"], out=(S, T1)))


def spec_forward(p, d):
    s0, s1 = scores(p)
    m = ops.stop_gradient(ops.maximum(ops.max(s0, T0), ops.max(s1, T1)))
    e0, e1 = ops.exp(s0 - m), ops.exp(s1 - m)
    o = ops.einsum(e0, p["v0"], out=(S, E)) + ops.einsum(e1, p["v1"], out=(S, E))
    return ops.sum(d["w"] * o / (ops.sum(e0, T0) + ops.sum(e1, T1)))


spec = Spec(params={"q": (S, H), "k0": (T0, H), "k1": (T1, H), "v0": (T0, E), "v1": (T1, E)},
            data={"w": real(S, E)}, forward=spec_forward, optimizer=SGD())


def online_forward(p, d):
    s0, s1 = scores(p)
    m1 = ops.stop_gradient(ops.max(s0, T0))                     # block 0: running max
    p0 = ops.exp(s0 - m1)
    l1, o1 = ops.sum(p0, T0), ops.einsum(p0, p["v0"], out=(S, E))
    m2 = ops.stop_gradient(ops.maximum(m1, ops.max(s1, T1)))     # block 1: new running max
    a = ops.exp(m1 - m2)                                         # rescale the old sums
    p1 = ops.exp(s1 - m2)
    l2 = l1 * a + ops.sum(p1, T1)
    o2 = o1 * a + ops.einsum(p1, p["v1"], out=(S, E))
    return ops.sum(d["w"] * o2 / l2)


plan = Plan(mesh=Mesh(dp=1), forward=online_forward)
