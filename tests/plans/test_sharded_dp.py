"""Sharded data parallelism (spec_lang/plans/sharded_dp.py): ZeRO-1/2/3, FSDP, HSDP, FSDP x TP
and flat buffers are proved on the debug Llama; their mutants are rejected (refuted with the
right goal and factor, or rejected by the types while tracing)."""

import dataclasses
from fractions import Fraction

import pytest

from proofs.prover import prove
from proofs.reduction import reduce_binding
from spec_lang import AdamW, Axis, Dim, PlanError, Shard, build_problem, load, ops
from spec_lang.collectives import all_reduce, reduce_scatter
from spec_lang.models import DEBUG, llama
from spec_lang.plan import Plan
from spec_lang.plans.sharded_dp import (
    DP_REPLICATE, DP_SHARD, FlatBuffer, ShardedDPSettings, fsdp, fsdp_tp, hsdp, owned_block,
    sharded_dp, zero1, zero2, zero3,
)

DP = Axis.DP
MODEL = llama(dataclasses.replace(DEBUG, batch=8))
SPEC = MODEL.spec(AdamW())


def _prove(plan, spec=SPEC):
    return prove(build_problem(spec, plan), timeout_s=60)


def _refuted(plan, goal, ratio=None, spec=SPEC):
    r = _prove(plan, spec)
    assert r.verdict == "NOT EQUIVALENT", r.verdict
    cx = r.counterexample
    assert cx.goal == goal, (cx.goal, cx.others)
    if ratio is None:
        assert cx.ratio is None or abs(cx.ratio - 1) > 1e-7
        assert any(abs(s - p) > 1e-9 * max(1.0, abs(s)) for _, s, p in cx.values)
    else:
        assert cx.ratio == pytest.approx(ratio, rel=1e-6), cx.render()
    return cx


def _with_reducer(plan, f):
    return dataclasses.replace(plan, reduce_grads=f)


# -- the recipes are proved -----------------------------------------------------------------------

@pytest.mark.parametrize("make", [
    lambda: zero1(MODEL, dp=2),
    lambda: zero2(MODEL, dp=4, microbatches=2),
    lambda: zero3(MODEL, dp=2),
    lambda: hsdp(MODEL, replicate=2, shard=2, microbatches=2),
    lambda: hsdp(MODEL, replicate=4, shard=1),           # B17's mesh shape, fixed
    lambda: hsdp(MODEL, replicate=1, shard=4),
    lambda: fsdp_tp(MODEL, dp=2, tp=2),
], ids=["zero1_dp2", "zero2_dp4_k2", "zero3_dp2", "hsdp_2x2_k2", "hsdp_4x1", "hsdp_1x4",
        "fsdp_tp_2x2"])
def test_recipe_is_equivalent(make):
    r = _prove(make())
    assert r.verdict == "EQUIVALENT", [(g.name, g.reason) for g in r.open_goals]


@pytest.mark.parametrize("make", [lambda: zero1(MODEL, dp=2, clip=True),
                                  lambda: hsdp(MODEL, replicate=2, shard=2, clip=True)],
                         ids=["zero1", "hsdp"])
def test_global_clipping_is_equivalent(make):
    # the norm: every shard's squares all-reduced over the shard axis, once over dp_replicate
    spec = MODEL.spec(AdamW(step=2), clip_grad_norm=Fraction(1, 2))
    r = _prove(make(), spec)
    assert r.verdict == "EQUIVALENT"


def test_hsdp_norm_summed_over_the_replicas_too_is_refuted():
    # B25's class: the replicated (over dp_replicate) shards counted |dp_replicate| times
    spec = MODEL.spec(AdamW(step=2), clip_grad_norm=Fraction(1, 100))
    base = hsdp(MODEL, replicate=2, shard=2, clip=True)
    plan = dataclasses.replace(base, grad_norm_sq=lambda gs: all_reduce(base.grad_norm_sq(gs),
                                                                        DP_REPLICATE))
    cx = _refuted(plan, "grad_norm", ratio=2 ** 0.5, spec=spec)
    assert cx.ratio == pytest.approx(2 ** 0.5)


def test_placements_are_the_documented_ones():
    p = hsdp(MODEL, replicate=2, shard=2)
    assert p.mesh.axes == ("dp_replicate", "dp_shard")
    assert p.placements["layers.0.mlp.w2"] == {"dp_shard": Shard("F")}
    assert p.placements["tokens"] == {"dp_replicate": Shard("B"), "dp_shard": Shard("B")}
    z = zero2(MODEL, dp=2)
    assert z.placements["output"] == {} and z.optimizer_placements["output"] == {"dp": Shard("H")}
    t = fsdp_tp(MODEL, dp=2, tp=2)      # w1 is column-parallel over F: FSDP takes H
    assert t.placements["layers.0.mlp.w1"] == {"dp": Shard("H"), "tp": Shard("F")}
    assert t.placements["layers.0.attn.wo"] == {"dp": Shard("G"), "tp": Shard("KVH")}


# -- mutants: semantic (refuted) --------------------------------------------------------------------

def test_fsdp_missing_average_is_twice_the_gradient():
    plan = fsdp(MODEL, dp=2, settings=ShardedDPSettings(stage=3, grad_average_axes=()))
    _refuted(plan, "grad:output", ratio=2.0)


@pytest.mark.parametrize("shard", [2, 4])
def test_hsdp_average_over_the_shard_axis_only(shard):
    # 1/|dp_shard| instead of 1/(|dp_replicate| |dp_shard|): the replicas' sum is not averaged
    plan = hsdp(MODEL, replicate=2, shard=shard,
                settings=ShardedDPSettings(grad_average_axes=(DP_SHARD,)))
    _refuted(plan, "grad:output", ratio=2.0)


def test_hsdp_all_reduce_over_the_wrong_axis():
    # the replicate all-reduce runs over dp_shard: it sums different blocks, replicas never meet
    plan = hsdp(MODEL, replicate=2, shard=2, settings=ShardedDPSettings(
        grad_reduce=((DP_SHARD, "none"), (DP_SHARD, "all_reduce"))))
    _refuted(plan, "grad:output")


@pytest.mark.parametrize("replicate", [2, 4])
def test_hsdp_replicate_all_reduce_missing_on_size_one_shard_group(replicate):
    # B17's class on the debug Llama: shard group of size 1, no replicate all-reduce
    plan = hsdp(MODEL, replicate=replicate, shard=1,
                settings=ShardedDPSettings(grad_reduce=((DP_SHARD, "none"),)))
    _refuted(plan, "grad:output")


def test_zero2_stale_shard_read_of_the_unreduced_gradient():
    # each rank steps with its block of its *local* gradient: the reduce-scatter never ran
    base = zero2(MODEL, dp=2)
    sd = {k: v["dp"].dim for k, v in base.optimizer_placements.items()}
    plan = _with_reducer(base, lambda n, g: owned_block(ops.recip(ops.axis_size(DP)) * g, DP,
                                                        sd[n]))
    _refuted(plan, "grad:output")


def test_fsdp_all_gather_with_split_backward_misses_the_reduce_scatter():
    # the unshard's declared backward keeps the rank's block of its own gradient (no sum)
    plan = fsdp(MODEL, dp=2, settings=ShardedDPSettings(gather=("all_gather", "split")))
    _refuted(plan, "grad:output")


# -- mutants: rejected by the types while tracing ------------------------------------------------------

def test_zero2_reduce_scatter_along_the_wrong_dim_is_a_plan_error():
    base = zero2(MODEL, dp=2)
    plan = _with_reducer(base, lambda n, g: reduce_scatter(g, DP, MODEL.params[n][-1]))
    with pytest.raises(PlanError, match="handed to the optimizer"):
        build_problem(SPEC, plan)


def test_fsdp_reduce_scatter_backward_along_the_wrong_dim_is_a_plan_error():
    # FSDP's gather of output (H[dp], V) declared with a reduce-scatter backward along V
    from spec_lang.collectives import region

    def forward(p, data):
        region(p["output"], "fsdp_all_gather", "all_gather", "reduce_scatter", DP, "V")

    plan = dataclasses.replace(fsdp(MODEL, dp=2), forward=forward)
    with pytest.raises(PlanError):
        build_problem(SPEC, plan)


def test_zero3_missing_all_gather_is_a_plan_error():
    base = zero3(MODEL, dp=2)
    plan = dataclasses.replace(base, forward=lambda p, d: MODEL.forward(p, d))
    with pytest.raises(PlanError, match="placed differently|agree|shard"):
        build_problem(SPEC, plan)


def test_zero2_missing_parameter_all_gather_is_a_plan_error():
    plan = dataclasses.replace(zero2(MODEL, dp=2), gather_params=None)
    with pytest.raises(PlanError, match="gather_params"):
        build_problem(SPEC, plan)


# -- flat buffers with explicit offsets -------------------------------------------------------------

def test_flat_buffer_index_map():
    V, H, K = Dim("V", 4), Dim("H", 4), Dim("K", 4)
    buf = FlatBuffer({"w1": (H, K), "emb": (V, H)}, DP, 2)
    assert buf.offset("w1") == (0, 16) and buf.offset("emb") == (16, 32)
    assert buf.owners("w1") == [0] and buf.owners("emb") == [1]
    assert buf.describe() == "[w1 0:16 | emb 16:32] over dp (2 x 16)"
    shifted = FlatBuffer({"b": (Dim("X", 2), H), "emb": (V, H)}, DP, 2)   # 8 + 16 = 24
    assert shifted.owners("emb") == [0, 1, 1, 1]     # row 0 on rank 0, rows 1-3 on rank 1
    one = FlatBuffer({"emb": (V, H)}, DP, 2)
    assert one.is_sharded("emb")
    with pytest.raises(PlanError, match="cuts a row"):
        FlatBuffer({"b": (Dim("Y", 1), Dim("Z", 3)), "emb": (V, H)}, DP, 2).owners("emb")
    with pytest.raises(PlanError, match="owned by ranks"):
        buf.owned("emb", None)


def _flat_problem(read):
    """Two-parameter model, dp=2, one flat buffer [w1 | w2]; ``read(buf, name, g)`` is what the
    optimizer of each parameter steps with."""
    from spec_lang import SGD, Loss, Mesh, Spec, real

    B, H, K, O = Dim("B", 4), Dim("H", 4), Dim("K", 4), Dim("O", 2)

    def f(p, d):
        h = ops.einsum(d["x"], p["w1"], out=(B, K))
        y = ops.einsum(h, p["w2"], out=(B, O))
        return ops.mean(ops.sum(y * y, O), B)

    spec = Spec(params={"w1": (H, K), "w2": (K, O)}, data={"x": real(B, H)}, forward=f,
                optimizer=SGD(lr=Fraction(1, 10)))
    buf = FlatBuffer({"w1": (H, K), "w2": (K, O)}, DP, 2)   # 16 + 8 = 24: 12 per rank

    def forward(p, d):
        seed = ops.axis_size(DP) * f(p, d)
        return Loss(backward=seed, report=all_reduce(f(p, d), DP))

    plan = Plan(mesh=Mesh(dp=2), placements={"x": {DP: Shard(B)}}, forward=forward,
                reduce_grads=lambda n, g: read(buf, n, g))
    return spec, plan, buf


def test_flat_buffer_owner_reads_are_the_spec_gradient():
    # every row block read from its owner after the reduce-scatter: evaluation at the real sizes
    # finds nothing (the owner selection, a BROADCAST of a rank-varying value, has no rewrite
    # rule, so the prover says UNKNOWN, never EQUIVALENT)
    spec, plan, buf = _flat_problem(
        lambda b, n, g: b.owner_value(n, b.after_reduce_scatter(n, g)))
    assert buf.owners("w1") == [0, 0, 0, 1] and buf.owners("w2") == [1]
    from proofs.refute import refute

    problem = build_problem(spec, plan)
    r = refute(problem.goals, problem.binding, problem.mesh, seeds=(0, 1, 2))
    assert not r.mismatched and not r.skipped


def test_flat_buffer_stale_slice_read_is_refuted():
    # every rank steps its whole slice of each parameter after the reduce-scatter: w2 (owned by
    # rank 1; the first gradient backward computes) is rank 0's own stale gradient there
    spec, plan, _ = _flat_problem(lambda b, n, g: b.after_reduce_scatter(n, g))
    r = _prove(plan, spec)
    assert r.verdict == "NOT EQUIVALENT"
    cx = r.counterexample
    assert cx.goal == "grad:w2" and "dp=0" in cx.render(), cx.render()


def test_flat_buffer_read_with_another_layout_is_refuted():
    # the optimizer uses the index map of a buffer laid out [w2 | w1] (wrong offsets): it reads
    # w1's rows from ranks that did not reduce them
    def read(b, n, g):
        other = FlatBuffer({"w2": (Dim("K", 4), Dim("O", 2)), "w1": (Dim("H", 4), Dim("K", 4))},
                           DP, 2)
        return other.owner_value(n, b.after_reduce_scatter(n, g))

    spec, plan, _ = _flat_problem(read)
    r = _prove(plan, spec)
    assert r.verdict == "NOT EQUIVALENT"


# -- size-1 axes are verified as given ----------------------------------------------------------------

def test_shape_reduction_keeps_size_one_axes():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    problem = load(root / "examples" / "bugs" / "B17_buggy.py")
    roots = [t for g in problem.goals for t in (g.expected, g.actual)]
    small = reduce_binding(roots, problem.binding)
    assert small["dp_replicate"] == 2 and small["dp_shard"] == 1
    assert problem.mesh == {"dp_replicate": 2, "dp_shard": 1}
    plan = hsdp(MODEL, replicate=2, shard=1)
    b = build_problem(SPEC, plan).binding
    rb = reduce_binding([], b)
    assert rb["dp_shard"] == 1 and rb["dp_replicate"] == 2


def test_unknown_stage_is_a_plan_error():
    with pytest.raises(PlanError, match="ZeRO stages"):
        sharded_dp(MODEL, mesh=zero1(MODEL, dp=2).mesh, settings=ShardedDPSettings(stage=4))


def test_hsdp_example_certificate_is_accepted(tmp_path):
    # the dp_replicate / dp_shard axes go through the independent checker (kernel sizes, rules)
    from pathlib import Path

    from proofs.certificate import certificate_of, write_certificate
    from proofs.checker import check_certificate

    path = Path(__file__).resolve().parents[2] / "examples" / "llama_debug_hsdp.py"
    r = prove(load(path), timeout_s=60)
    assert r.verdict == "EQUIVALENT"
    cert = tmp_path / "hsdp.json"
    write_certificate(cert, certificate_of(r))
    res = check_certificate(cert, retrace=True, plan_path=path)
    assert res.verdict == "EQUIVALENT" and res.checked == res.total == 85, res.summary()
