"""B31 fixed: PyTorch #166598 (PR #166999), 2-D mesh, strided shard redistributed first.

Source: https://github.com/pytorch/pytorch/issues/166598. Spec: C = A @ B with A (M, K),
B (K, N); loss = sum(C * W), W (M, N) trained (grad:W = C).
Plan (Mesh(dp=2, tp=2), k = 4): A is K[dp,tp] (column 2i + j on rank (i, j)); B arrives with
an interleaved shard on dp (K[tp,dp], row i + 2j). The fix: ``redistribute`` B to A's order
(all-gather, then this rank's block of K[dp,tp]) so K_r^A = K_r^B on every rank, then the
library's local matmul and an all-reduce over dp and tp.
Expected: EQUIVALENT, certificate accepted.
Smallest configuration (CASES.md B31): 2 x 2 mesh, k = 4.
"""

from spec_lang import SGD, Axis, Dim, Mesh, Plan, Shard, Spec, all_reduce, ops, real
from spec_lang.dtensor import redistribute
from spec_lang.placement import StridedShard

DP, TP = Axis.DP, Axis.TP
M, K, N = Dim("M", 4), Dim("K", 4), Dim("N", 4)

spec = Spec(params={"W": (M, N)}, data={"A": real(M, K), "B": real(K, N)},
            forward=lambda p, d: ops.sum(ops.einsum(d["A"], d["B"], out=(M, N)) * p["W"]),
            optimizer=SGD())


def forward(p, d):
    b = redistribute(d["B"], {DP: Shard(K), TP: Shard(K)})   # K[tp,dp] -> K[dp,tp], like A
    c = all_reduce(all_reduce(ops.einsum(d["A"], b, out=(M, N)), DP), TP)
    return ops.sum(c * p["W"])


plan = Plan(mesh=Mesh(dp=2, tp=2), forward=forward,
            placements={"A": {DP: Shard(K), TP: Shard(K)},
                        "B": {DP: StridedShard(K, split_factor=2), TP: Shard(K)}})
