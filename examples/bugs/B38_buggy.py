"""B38 buggy: RL-Kernel #313, TP row-parallel linear, cast to bf16 *before* the TP all-reduce.

Source: CASES.md B38 (RL-Kernel issue #313). Floating-point only: over the reals the plan equals
the spec, so the proof says EQUIVALENT (correctly); ``prove --precision-lint`` flags it.
Spec (tp = 1): y = bf16(sum_k a_k w_k): fp32 accumulation over the whole contraction, one
rounding; loss = sum(y * target).
Plan (Mesh(tp=2), row-parallel: w and a sharded along K): rank t computes the fp32 partial
P_t = sum_{k in K_t} a_k w_k, casts it to bf16, and the TP all-reduce adds bf16 values:
y = sum_t bf16(P_t). With a = w = (1, 2^-4, 2^-4, 0) split 2|2: P_0 = 1 + 2^-8, P_1 = 2^-8;
spec 1.0078125, plan 1.0 (round-to-nearest-even; tests/bugs/test_precision.py).
Expected: proof EQUIVALENT; lint FLAG at the reduce_from_tp_region line (bf16 < fp32).
Smallest configuration (CASES.md B38): tp = 2, k = 4 split 2|2.
"""

from spec_lang import (
    SGD, Axis, Dim, Mesh, Plan, Shard, Spec, ops, real, reduce_from_tp_region,
)

TP = Axis.TP
B, K, N = Dim("B", 1), Dim("K", 4), Dim("N", 1)

spec = Spec(params={"w": (K, N)}, data={"a": real(B, K), "target": real(B, N)},
            forward=lambda p, d: ops.sum(
                ops.cast(ops.einsum(d["a"], p["w"], out=(B, N)), "bf16") * d["target"]),
            optimizer=SGD())


def forward(p, d):
    partial = ops.einsum(d["a"], p["w"], out=(B, N))          # fp32 partial sum over K_t
    y = reduce_from_tp_region(ops.cast(partial, "bf16"), TP)  # the bug: bf16 all-reduce
    return ops.sum(y * d["target"])


plan = Plan(mesh=Mesh(tp=2), forward=forward,
            placements={"w": {TP: Shard(K)}, "a": {TP: Shard(K)}})
