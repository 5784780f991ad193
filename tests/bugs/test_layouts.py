"""CASES.md section 6, operator semantics and layouts: B31 (strided shards, PyTorch #166598).

Placements are index maps: ``{dp: Shard(K), tp: Shard(K)}`` puts block ``2i + j`` of ``K`` on rank
``(i, j)`` of ``Mesh(dp=2, tp=2)`` (type ``K[dp,tp]``); ``{dp: StridedShard(K), tp: Shard(K)}``
puts block ``i + 2j`` there (``K[tp,dp]``). The library contracts only equal index maps; a user
forcing a local matmul of mismatched blocks (``to_local``) is refuted with values; redistributing
first is proved.
"""

from __future__ import annotations

import numpy as np
import pytest

from proofs.prover import prove
from spec_lang import (
    SGD, Axis, Dim, Loss, Mesh, Plan, PlanError, Shard, Spec, all_reduce, build_problem, load, ops,
    real,
)
from spec_lang.dtensor import block_order, redistribute, to_local
from spec_lang.evaluate import evaluate
from spec_lang.placement import StridedShard, lineage
from spec_lang.spec import input_term
from tests.bugs.cases import BUGS, assert_certified, assert_refuted

DP, TP = Axis.DP, Axis.TP


def test_b31_forced_local_matmul_is_refuted():
    cx = assert_refuted("B31", goals_any=("loss", "grad:W"))
    assert set(cx.others) >= {"grad:W"} or cx.goal == "grad:W"


def test_b31_redistribute_then_matmul_is_certified(tmp_path):
    assert_certified("B31", tmp_path)


def test_b31_plan_value_is_the_cases_md_formula():
    """grad:W = C_plan = A_0 B_0 + A_1 B_2 + A_2 B_1 + A_3 B_3 (A_k a column, B_k a row)."""
    pr = load(BUGS / "B31_buggy.py")
    g = next(g for g in pr.goals if g.name == "grad:W")
    rng = np.random.default_rng(1)
    a, b, w = rng.normal(size=(4, 4)), rng.normal(size=(4, 4)), rng.normal(size=(4, 4))
    out = evaluate([g.actual], pr.binding, {"A": a, "B": b, "W": w}, keep="roots")[g.actual]
    c_plan = sum(np.outer(a[:, k], b[s, :]) for k, s in enumerate((0, 2, 1, 3)))
    # axes: maybe rank axes (replicated: none), then dims by name M, N
    got = out.transpose_to(("M", "N")).reshape(4, 4)
    assert np.allclose(got, c_plan)
    assert not np.allclose(got, a @ b)


def test_index_maps_of_plain_and_strided_shards():
    """Rank (i, j) holds K block 2i + j (plain) and i + 2j (strided), evaluated."""
    x = input_term("X", "data", "real", (Dim("K", 4),))
    mesh = {"dp": 2, "tp": 2}
    plain = lineage(x, {"dp": Shard("K"), "tp": Shard("K")}, mesh)
    strided = lineage(x, {"dp": StridedShard("K"), "tp": Shard("K")}, mesh)
    assert [str(d) for d in plain.dims] == ["K[dp,tp]"]
    assert [str(d) for d in strided.dims] == ["K[tp,dp]"]
    from spec_lang.term import Binding

    vals = evaluate([plain, strided], Binding({"K": 4, **mesh}), {"X": np.arange(4.0)})
    for t, f in ((plain, lambda i, j: 2 * i + j), (strided, lambda i, j: i + 2 * j)):
        v = vals[t].transpose_to(("@dp", "@tp", "K"))
        for i in range(2):
            for j in range(2):
                assert v[i, j, 0] == f(i, j), (t, i, j)
    assert block_order(("tp", "dp"), mesh) == (("dp", "tp"), (0, 2, 1, 3))


def test_library_contraction_needs_equal_index_maps():
    M, K, N = Dim("M", 4), Dim("K", 4), Dim("N", 4)
    spec = Spec(params={"W": (M, N)}, data={"A": real(M, K), "B": real(K, N)},
                forward=lambda p, d: ops.sum(ops.einsum(d["A"], d["B"], out=(M, N)) * p["W"]),
                optimizer=SGD())
    plan = Plan(mesh=Mesh(dp=2, tp=2),
                forward=lambda p, d: ops.sum(all_reduce(all_reduce(
                    ops.einsum(d["A"], d["B"], out=(M, N)), DP), TP) * p["W"]),
                placements={"A": {DP: Shard(K), TP: Shard(K)},
                            "B": {DP: StridedShard(K), TP: Shard(K)}})
    with pytest.raises(PlanError, match=r"K\[dp,tp\].*K\[tp,dp\]|K\[tp,dp\].*K\[dp,tp\]"):
        build_problem(spec, plan)


def test_split_factor_is_checked():
    K = Dim("K", 8)
    spec = Spec(params={"w": (K,)}, data={"x": real(K)},
                forward=lambda p, d: ops.sum(p["w"] * d["x"]), optimizer=SGD())
    plan = Plan(mesh=Mesh(dp=2, tp=2), forward=lambda p, d: ops.sum(p["w"] * d["x"]),
                placements={"x": {DP: StridedShard(K, split_factor=4), TP: Shard(K)}})
    with pytest.raises(PlanError, match="split_factor must be the product"):
        build_problem(spec, plan)


# -- generalisation: sizes, mesh shapes, another dim, matching strided orders ---------------------------
def matmul_problem(dp, tp, k, *, a_strided=False, b_strided=True, fix="none"):
    M, K, N = Dim("M", 2), Dim("K", k), Dim("N", 2)
    spec = Spec(params={"W": (M, N)}, data={"A": real(M, K), "B": real(K, N)},
                forward=lambda p, d: ops.sum(ops.einsum(d["A"], d["B"], out=(M, N)) * p["W"]),
                optimizer=SGD())

    def pl(strided):
        return {DP: StridedShard(K) if strided else Shard(K), TP: Shard(K)}

    def forward(p, d):
        a, b = d["A"], d["B"]
        if fix == "to_local":
            a, b = to_local(a), to_local(b)
        elif fix == "redistribute":
            b = redistribute(b, pl(a_strided))
        elif fix == "replicate":
            a, b = redistribute(a, {}), redistribute(b, {})
            return ops.sum(ops.einsum(a, b, out=(M, N)) * p["W"])
        return ops.sum(all_reduce(all_reduce(ops.einsum(a, b, out=(M, N)), DP), TP) * p["W"])

    plan = Plan(mesh=Mesh(dp=dp, tp=tp), forward=forward,
                placements={"A": pl(a_strided), "B": pl(b_strided)})
    return build_problem(spec, plan)


@pytest.mark.parametrize("dp,tp,k", [(2, 2, 4), (2, 4, 8), (4, 2, 8), (2, 2, 8), (3, 2, 6)])
def test_forced_local_matmul_refuted_and_redistribute_proved(dp, tp, k):
    bad = prove(matmul_problem(dp, tp, k, fix="to_local"), timeout_s=60)
    assert bad.verdict == "NOT EQUIVALENT", bad.verdict
    assert bad.counterexample.goal in ("loss", "grad:W")
    assert any(abs(s - p) > 1e-9 * max(1, abs(s)) for _, s, p in bad.counterexample.values)
    good = prove(matmul_problem(dp, tp, k, fix="redistribute"), timeout_s=60)
    assert good.verdict == "EQUIVALENT", [(g.name, g.reason) for g in good.goals]


def test_replicate_both_then_local_matmul_is_proved():
    r = prove(matmul_problem(2, 2, 4, fix="replicate"), timeout_s=60)
    assert r.verdict == "EQUIVALENT", [(g.name, g.reason) for g in r.goals]


def test_both_strided_alike_contract_without_redistribution():
    """K_r^A = K_r^B when both operands carry the same strided map: the library contracts them."""
    r = prove(matmul_problem(2, 2, 4, a_strided=True, b_strided=True), timeout_s=60)
    assert r.verdict == "EQUIVALENT", [(g.name, g.reason) for g in r.goals]


def test_to_local_of_matching_maps_is_not_a_bug():
    """to_local on both operands with the same strided map pairs the same global blocks: the
    refuter finds no difference (the verdict is not NOT EQUIVALENT)."""
    r = prove(matmul_problem(2, 2, 4, a_strided=True, b_strided=True, fix="to_local"),
              timeout_s=60)
    assert r.verdict in ("EQUIVALENT", "UNKNOWN"), r.verdict
    assert r.counterexample is None


def _elementwise_problem(fix):
    """A strided shard on a non-contracted dim: w, x plain over (dp, tp) along M, y strided;
    loss sum_M w * x * y. Forcing to_local pairs x row 2i + j with y row i + 2j."""
    M = Dim("M", 8)
    spec = Spec(params={"w": (M,)}, data={"x": real(M), "y": real(M)},
                forward=lambda p, d: ops.sum(p["w"] * d["x"] * d["y"]), optimizer=SGD())

    def forward(p, d):
        x, y = d["x"], d["y"]
        if fix == "to_local":
            x, y = to_local(x), to_local(y)
        else:
            y = redistribute(y, {DP: Shard(M), TP: Shard(M)})
        local = ops.sum(p["w"] * x * y)
        return Loss(backward=local, report=all_reduce(all_reduce(local, DP), TP))

    plan = Plan(mesh=Mesh(dp=2, tp=2), forward=forward,
                placements={"w": {DP: Shard(M), TP: Shard(M)},
                            "x": {DP: Shard(M), TP: Shard(M)},
                            "y": {DP: StridedShard(M), TP: Shard(M)}})
    return build_problem(spec, plan)


def test_strided_shard_on_an_elementwise_dim():
    bad = prove(_elementwise_problem("to_local"), timeout_s=60)
    assert bad.verdict == "NOT EQUIVALENT" and bad.counterexample.goal in ("loss", "grad:w")
    good = prove(_elementwise_problem("redistribute"), timeout_s=60)
    assert good.verdict == "EQUIVALENT", [(g.name, g.reason) for g in good.goals]


def test_elementwise_on_mismatched_maps_is_refused_by_the_library():
    M = Dim("M", 8)
    spec = Spec(params={"w": (M,)}, data={"x": real(M), "y": real(M)},
                forward=lambda p, d: ops.sum(p["w"] * d["x"] * d["y"]), optimizer=SGD())
    plan = Plan(mesh=Mesh(dp=2, tp=2), forward=lambda p, d: ops.sum(p["w"] * d["x"] * d["y"]),
                placements={"w": {DP: Shard(M), TP: Shard(M)}, "x": {DP: Shard(M), TP: Shard(M)},
                            "y": {DP: StridedShard(M), TP: Shard(M)}})
    with pytest.raises(PlanError, match="M"):
        build_problem(spec, plan)


def test_strided_parameter_fsdp2_over_tp():
    """A parameter placed like FSDP2 over TP (StridedShard on dp): its gradient and update keep
    the strided index map; data with the same map contracts, data with the plain map is refused."""
    M = Dim("M", 8)
    spec = Spec(params={"w": (M,)}, data={"x": real(M)},
                forward=lambda p, d: ops.sum(p["w"] * d["x"]), optimizer=SGD())
    strided = {DP: StridedShard(M, split_factor=2), TP: Shard(M)}

    def forward(p, d):
        local = ops.sum(p["w"] * d["x"])
        return Loss(backward=local, report=all_reduce(all_reduce(local, DP), TP))

    ok = build_problem(spec, Plan(mesh=Mesh(dp=2, tp=2), forward=forward,
                                  placements={"w": strided, "x": strided}))
    assert [str(d) for d in next(g for g in ok.goals if g.name == "w").expected.dims] == ["M[tp,dp]"]
    r = prove(ok, timeout_s=60)
    assert r.verdict == "EQUIVALENT", [(g.name, g.reason) for g in r.goals]
    with pytest.raises(PlanError, match=r"M\[tp,dp\]"):
        build_problem(spec, Plan(mesh=Mesh(dp=2, tp=2), forward=forward,
                                 placements={"w": strided, "x": {DP: Shard(M), TP: Shard(M)}}))
