"""CASES.md section 4, norms and clipping: B23 (EP) and B25 (TP), and the library's
``global_grad_norm_sq`` on TP, DP (ZeRO), EP and stage-sharded (pp) gradients.

Class rule: the plan's squared norm equals ``||g||^2`` with each tensor's multiplicity taken from
its placement on every mesh axis: Shard -> summed over the axis, Replicate -> counted once. The
spec clips (``Spec(..., clip_grad_norm=c)``) with ``c`` small enough that clipping is active, so
a wrong norm changes the updated parameters, not only the ``grad_norm`` output.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from proofs.prover import prove
from spec_lang import (
    SGD, AdamW, Axis, Dim, Loss, Mesh, Plan, PlanError, Shard, Spec, all_gather, all_reduce,
    build_problem, load, ops, real, reduce_scatter,
)
from spec_lang.evaluate import evaluate, sample_inputs
from spec_lang.models import DEBUG, ParallelContext, llama
from spec_lang.plans import global_grad_norm_sq, grad_norm_sq_fn, megatron, shard_axes
from tests.bugs.cases import BUGS, assert_certified, assert_refuted

TP, DP, EP, PP = Axis.TP, Axis.DP, Axis.EP, Axis.PP


def _prove(spec, plan):
    return prove(build_problem(spec, plan), timeout_s=120)


def _goal_values(problem, name, inputs):
    """(spec, plan) float64 values of goal ``name``; the plan's must agree on every rank."""
    goal = next(g for g in problem.goals if g.name == name)
    vals = evaluate([goal.expected, goal.actual], problem.binding, inputs)
    e, a = vals[goal.expected].data.ravel(), vals[goal.actual].data.ravel()
    assert np.allclose(a, a[0]) and np.allclose(e, e[0])
    return float(e[0]), float(a[0])


def _not_a_factor(cx):
    """The counterexample's values differ and are not reported as a constant-factor bug."""
    assert any(abs(sv - pv) > 1e-9 * max(1.0, abs(sv)) for _, sv, pv in cx.values)
    return cx.ratio is None or "not a simple factor" in cx.render()


def _refuted_at(spec, plan, goal="grad_norm"):
    r = _prove(spec, plan)
    assert r.verdict == "NOT EQUIVALENT", r.verdict
    assert r.counterexample.goal == goal, (r.counterexample.goal, r.counterexample.others)
    return r.counterexample


# -- B23: expert parallelism -------------------------------------------------------------------------

def test_b23_average_of_roots_is_refuted():
    cx = assert_refuted("B23", goal="grad_norm")
    assert _not_a_factor(cx)
    assert "experts" in cx.others                    # clipping is active: the update differs


def test_b23_fixed_is_certified(tmp_path):
    assert_certified("B23", tmp_path)


def _b23_inputs():
    x = np.zeros((2, 2, 2))
    x[0, 0] = [4.0, 2.0]                             # expert 0's gradient: E_0 = 16 + 4 = 20
    x[1, 0] = [8.0, 6.0]                             # expert 1's gradient: E_1 = 64 + 36 = 100
    return {"x": x, "experts": np.array([[0.5, -1.0], [2.0, 0.25]])}


def test_b23_concrete_norms_from_cases_md():
    spec_nu, bug_nu = _goal_values(load(BUGS / "B23_buggy.py"), "grad_norm", _b23_inputs())
    assert spec_nu == pytest.approx(math.sqrt(120)) and round(spec_nu, 3) == 10.954
    assert bug_nu == pytest.approx((math.sqrt(20) + 10) / 2) and round(bug_nu, 3) == 7.236
    spec_nu2, fixed_nu = _goal_values(load(BUGS / "B23_fixed.py"), "grad_norm", _b23_inputs())
    assert spec_nu2 == spec_nu and fixed_nu == pytest.approx(math.sqrt(120))


def _ep_plan(ep: int, norm: str):
    """``ep`` experts (one per rank) plus a dense replicated weight every token uses.

    norm: "library" (global_grad_norm_sq), "avg_roots" (B23's bug), "dense_summed" (the dense
    squares also all-reduced over ep: counted ep times), "local" (no all-reduce at all).
    """
    E, C, H = Dim("E", ep), Dim("C", 2), Dim("H", 2)

    def loss(p, d):
        y = ops.einsum(d["x"], p["experts"], out=(E, C)) + ops.einsum(d["x"], p["dense"],
                                                                      out=(E, C))
        return ops.sum(y * y) / 2

    spec = Spec(params={"experts": (E, H), "dense": (H,)}, data={"x": real(E, C, H)},
                forward=loss, optimizer=SGD(), clip_grad_norm=Fraction(1, 100))
    placements = {"experts": {EP: Shard(E)}, "x": {EP: Shard(E)}}

    def fwd(p, d):
        local = loss(p, d)
        return Loss(backward=local, report=all_reduce(local, EP))

    def grad_norm_sq(grads):
        if norm == "library":
            return global_grad_norm_sq(grads, placements, mesh=Mesh(ep=ep))
        e_r, dense = ops.sum(grads["experts"] ** 2), ops.sum(grads["dense"] ** 2)
        if norm == "avg_roots":
            nu = all_reduce(ops.sqrt(dense + e_r), EP, "avg")
            return nu * nu
        if norm == "dense_summed":
            return all_reduce(dense + e_r, EP)
        return dense + e_r

    return spec, Plan(mesh=Mesh(ep=ep), placements=placements, forward=fwd,
                      reduce_grads={"dense": lambda n, g: all_reduce(g, EP)},
                      grad_norm_sq=grad_norm_sq)


@pytest.mark.parametrize("ep", [2, 4])
def test_b23_class_library_norm_is_equivalent(ep):
    assert _prove(*_ep_plan(ep, "library")).verdict == "EQUIVALENT"


@pytest.mark.parametrize("ep", [2, 4])
@pytest.mark.parametrize("norm", ["avg_roots", "dense_summed", "local"])
def test_b23_class_mutants_are_refuted(ep, norm):
    cx = _refuted_at(*_ep_plan(ep, norm))
    assert _not_a_factor(cx) and {"experts", "dense"} <= set(cx.others)


# -- B25: TP with a replicated linear --------------------------------------------------------------

def test_b25_replicated_counted_tp_times_is_refuted():
    cx = assert_refuted("B25", goal="grad_norm")
    assert _not_a_factor(cx) and {"A", "W"} <= set(cx.others)


def test_b25_fixed_is_certified(tmp_path):
    assert_certified("B25", tmp_path)


def _b25_norms(scale_w: float, seed: int = 0):
    """(spec ||g||, buggy nu, ||g_A||^2, ||g_W||^2) with W scaled by ``scale_w``."""
    rng = np.random.default_rng(seed)
    inputs = {"x": rng.normal(size=(2, 2)), "A": rng.normal(size=(2, 2)),
              "W": scale_w * rng.normal(size=(2, 4))}
    problem = load(BUGS / "B25_buggy.py")
    spec_nu, bug_nu = _goal_values(problem, "grad_norm", inputs)
    ga = evaluate([problem.spec_outputs["grad:A"]], problem.binding, inputs)
    gw = evaluate([problem.spec_outputs["grad:W"]], problem.binding, inputs)
    sq_a = float((ga[problem.spec_outputs["grad:A"]].data ** 2).sum())
    sq_w = float((gw[problem.spec_outputs["grad:W"]].data ** 2).sum())
    return spec_nu, bug_nu, sq_a, sq_w


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_b25_norm_is_sharded_plus_tp_times_replicated(seed):
    spec_nu, bug_nu, sq_a, sq_w = _b25_norms(1.0, seed)
    assert spec_nu ** 2 == pytest.approx(sq_a + sq_w)
    assert bug_nu ** 2 == pytest.approx(sq_w + 2 * sq_a)          # tp = 2
    f = sq_a / (sq_a + sq_w)
    assert bug_nu / spec_nu == pytest.approx(math.sqrt(1 + f))      # sqrt(1 + (tp - 1) f)


def test_b25_equal_shares_give_sqrt_one_point_five():
    # ||g_A||^2 scales as |W|^4 and ||g_W||^2 as |W|^2: pick the W scale that makes them equal
    _, _, sq_a, sq_w = _b25_norms(1.0)
    spec_nu, bug_nu, sq_a2, sq_w2 = _b25_norms((sq_w / sq_a) ** 0.5)
    assert sq_a2 == pytest.approx(sq_w2)                           # f = 1/2
    assert bug_nu / spec_nu == pytest.approx(math.sqrt(1.5))


# -- B25 class on the debug Llama under Megatron TP (+SP): the library norm and mutants ------------

CLIP = Fraction(1, 100)


def _llama_tp(sp: bool, norm=None):
    model = llama(DEBUG)
    spec = model.spec(AdamW(), clip_grad_norm=CLIP)
    plan = megatron(model, tp=2, dp=2, microbatches=1, sp=sp)
    if norm is None:
        return spec, plan
    return spec, Plan(mesh=plan.mesh, placements=plan.placements, forward=plan.forward,
                      reduce_grads=plan.reduce_grads, microbatches=plan.microbatches,
                      grad_norm_sq=norm)


@pytest.mark.parametrize("sp", [False, True])
def test_megatron_tp_clipping_is_equivalent(sp):
    assert _prove(*_llama_tp(sp)).verdict == "EQUIVALENT"


def _sum_sq(grads):
    total = None
    for g in grads.values():
        s = ops.sum(g * g)
        total = s if total is None else total + s
    return total


@pytest.mark.parametrize("sp", [False, True])
def test_b25_mutant_llama_replicated_norm_weights_counted_tp_times(sp):
    cx = _refuted_at(*_llama_tp(sp, lambda grads: all_reduce(_sum_sq(grads), TP)))
    assert _not_a_factor(cx)


@pytest.mark.parametrize("sp", [False, True])
def test_b25_mutant_llama_sharded_weights_counted_once(sp):
    # the opposite mistake: no tp all-reduce at all, the column/row blocks count one rank only
    cx = _refuted_at(*_llama_tp(sp, _sum_sq))
    assert _not_a_factor(cx)


# -- DP (ZeRO-1): gradients reduce-scattered over dp, the norm summed over dp ---------------------

def _zero1(norm: str):
    model = llama(DEBUG)
    d = model.dims
    spec = model.spec(AdamW(step=2), clip_grad_norm=CLIP)
    owned = {name: dims[0] for name, dims in model.params.items()}
    opt_pl = {name: {DP: Shard(dim)} for name, dim in owned.items()}

    class DataParallel(ParallelContext):
        def loss(self, logits, labels, mask, d):
            ce = ops.cross_entropy_per_token(logits, labels, d.V)
            return ops.sum(mask * ce) / all_reduce(ops.sum(mask), DP)

    def forward(p, data):
        seed = model.forward(p, data, DataParallel())
        return Loss(backward=seed, report=all_reduce(seed, DP))

    norms = {
        "library": grad_norm_sq_fn(opt_pl, mesh=Mesh(dp=2)),
        "param_placements": grad_norm_sq_fn({}),      # the parameters' placement: Replicate
        "local": _sum_sq,                              # ZeRO shards counted on one rank only
    }
    return spec, Plan(
        mesh=Mesh(dp=2),
        placements={"tokens": {DP: Shard(d.B)}, "labels": {DP: Shard(d.B)},
                    "mask": {DP: Shard(d.B)}},
        forward=forward, optimizer_placements=opt_pl,
        reduce_grads=lambda name, g: reduce_scatter(g, DP, owned[name]),
        gather_params=lambda name, p: all_gather(p, DP, owned[name]),
        grad_norm_sq=norms[norm])


def test_zero1_library_norm_is_equivalent():
    assert _prove(*_zero1("library")).verdict == "EQUIVALENT"


def test_zero1_mutant_local_norm_is_refuted():
    _refuted_at(*_zero1("local"))


def test_zero1_wrong_placements_are_a_plan_error():
    # the gradients handed to the optimizer are Shard over dp: a map saying Replicate is wrong
    with pytest.raises(PlanError, match="sharded over \\['dp'\\] by its type but the placements"):
        build_problem(*_zero1("param_placements"))


# -- pp: stage-owned gradients ----------------------------------------------------------------------

def _stages(norm: str):
    """Two stages, each owning one layer of a stack W (L=2, H): Shard(L) over pp."""
    L, C, H = Dim("L", 2), Dim("C", 2), Dim("H", 2)

    def loss(p, d):
        y = ops.einsum(d["x"], p["W"], out=(L, C))
        return ops.sum(y * y) / 2

    spec = Spec(params={"W": (L, H)}, data={"x": real(L, C, H)}, forward=loss, optimizer=SGD(),
                clip_grad_norm=CLIP)
    placements = {"W": {PP: Shard(L)}, "x": {PP: Shard(L)}}
    norms = {"pp_arg": grad_norm_sq_fn(mesh=Mesh(pp=2), pp=PP),
             "typed": grad_norm_sq_fn(placements),
             "per_stage": _sum_sq}                    # each stage clips with its own norm

    def fwd(p, d):
        local = loss(p, d)
        return Loss(backward=local, report=all_reduce(local, PP))

    return spec, Plan(mesh=Mesh(pp=2), placements=placements, forward=fwd,
                      grad_norm_sq=norms[norm])


@pytest.mark.parametrize("norm", ["pp_arg", "typed"])
def test_stage_norm_summed_over_pp_is_equivalent(norm):
    assert _prove(*_stages(norm)).verdict == "EQUIVALENT"


def test_stage_local_norm_is_refuted():
    _refuted_at(*_stages("per_stage"))


def test_pp_axis_must_be_in_the_mesh():
    with pytest.raises(PlanError, match="no such axis"):
        build_problem(*_stages("pp_arg")[:1], Plan(
            mesh=Mesh(tp=2), forward=lambda p, d: ops.sum(p["W"]),
            grad_norm_sq=grad_norm_sq_fn(mesh=Mesh(tp=2), pp="pp")))


# -- the function itself ---------------------------------------------------------------------------

def test_shard_axes_and_grouping_follow_the_type():
    spec, plan = _ep_plan(2, "library")
    seen = {}

    def spy(grads):
        seen.update({n: shard_axes(g) for n, g in grads.items()})
        return plan.grad_norm_sq(grads)

    build_problem(spec, Plan(mesh=plan.mesh, placements=plan.placements, forward=plan.forward,
                             reduce_grads=plan.reduce_grads, grad_norm_sq=spy))
    assert seen == {"experts": ("ep",), "dense": ()}


def test_library_norm_value_on_random_inputs():
    # nu^2 = AR_sum[ep](E_r) + D, evaluated: equal to the spec's ||g||^2 on random inputs
    spec, plan = _ep_plan(4, "library")
    problem = build_problem(spec, plan)
    goal = next(g for g in problem.goals if g.name == "grad_norm")
    inputs = sample_inputs([goal.expected, goal.actual], problem.binding,
                           np.random.default_rng(7))
    e, a = _goal_values(problem, "grad_norm", inputs)
    assert a == pytest.approx(e, rel=1e-12) and e > CLIP      # clipping active
