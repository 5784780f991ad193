"""B31 buggy: PyTorch #166598 (fixed by PR #166999), 2-D mesh, strided shard on a contraction dim.

Source: https://github.com/pytorch/pytorch/issues/166598. Spec: C = A @ B with A (M, K),
B (K, N): C = sum_k A[:, k] B[k, :]; loss = sum(C * W) with W (M, N) the trained weight (so
grad:W = C).
Plan (Mesh(dp=2, tp=2), k = 4): A's columns are sharded on both mesh axes in the plain order
(rank (i, j) holds column 2i + j, type K[dp,tp]); B's rows carry an interleaved shard on dp
(``StridedShard``, FSDP2 over TP) plus a plain shard on tp (rank (i, j) holds row i + 2j, type
K[tp,dp]). The library's einsum refuses the pair (K_r^A != K_r^B); the user forces it: both
operands ``to_local()``, local matmul, the result taken as Partial over every rank and
all-reduced over dp and tp: C_plan = A_0 B_0 + A_1 B_2 + A_2 B_1 + A_3 B_3 (CASES.md B31).
Expected: NOT EQUIVALENT; values of C (loss, grad:W) differ.
Smallest configuration (CASES.md B31): 2 x 2 mesh, k = 4 (4 x 4 matrices).
"""

from spec_lang import SGD, Axis, Dim, Mesh, Plan, Shard, Spec, all_reduce, ops, real
from spec_lang.dtensor import to_local
from spec_lang.placement import StridedShard

DP, TP = Axis.DP, Axis.TP
M, K, N = Dim("M", 4), Dim("K", 4), Dim("N", 4)

spec = Spec(params={"W": (M, N)}, data={"A": real(M, K), "B": real(K, N)},
            forward=lambda p, d: ops.sum(ops.einsum(d["A"], d["B"], out=(M, N)) * p["W"]),
            optimizer=SGD())


def forward(p, d):
    # ops.einsum(d["A"], d["B"]) is a PlanError: K[dp,tp] vs K[tp,dp]. The user forces it:
    c_partial = ops.einsum(to_local(d["A"]), to_local(d["B"]), out=(M, N))
    c = all_reduce(all_reduce(c_partial, DP), TP)   # Partial over every rank -> full tensor
    return ops.sum(c * p["W"])


plan = Plan(mesh=Mesh(dp=2, tp=2), forward=forward,
            placements={"A": {DP: Shard(K), TP: Shard(K)},
                        "B": {DP: StridedShard(K, split_factor=2), TP: Shard(K)}})
