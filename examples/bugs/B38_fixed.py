"""B38 fixed: RL-Kernel #313, TP row-parallel linear, fp32 all-reduce, one cast after it.

Source: CASES.md B38 (RL-Kernel issue #313). Floating-point only: over the reals the plan equals
the spec, so the proof says EQUIVALENT (correctly); ``prove --precision-lint`` flags it.
Spec (tp = 1): y = bf16(sum_k a_k w_k): fp32 accumulation over the whole contraction, one
rounding; loss = sum(y * target).
Plan (Mesh(tp=2), row-parallel: w and a sharded along K): the fp32 partials go through the TP
all-reduce and are cast once: y = bf16(AR_sum[tp](P_t)) (1.0078125 for the CASES.md inputs).
Expected: proof EQUIVALENT, certificate accepted; lint PASS.
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
    y = ops.cast(reduce_from_tp_region(partial, TP), "bf16")  # fp32 all-reduce, then cast
    return ops.sum(y * d["target"])


plan = Plan(mesh=Mesh(tp=2), forward=forward,
            placements={"w": {TP: Shard(K)}, "a": {TP: Shard(K)}})
