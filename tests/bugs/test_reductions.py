"""CASES.md section 2, missing or mis-grouped reductions: B12 (TP + SP) and B14 (TP + CP).

Class rule: a Partial[G] gradient is reduced exactly once over exactly G; a gradient that is
already Replicate over an axis is not summed over it again. The cases at their smallest
configuration, then the class: other sizes and axes, and mutants on the debug Llama under
Megatron TP + SP (the plan library's ``megatron(..., sp=True)`` and the hand-written
``tests/spec_lang/plans/debug_tp_sp.py``).
"""

from __future__ import annotations

import importlib.util
from types import SimpleNamespace

import pytest

from proofs.prover import prove
from spec_lang import (
    SGD, AdamW, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, build_problem,
    gather_from_sp_region, index, load, mask, ops, real,
)
from spec_lang.models import DEBUG, llama
from spec_lang.plans import MegatronSettings, megatron, partial_grad_axes, vocab_parallel_cross_entropy
from tests.bugs.cases import BUGS, ROOT, assert_certified, assert_refuted

TP, CP, DP = Axis.TP, Axis.CP, Axis.DP


def _module(name):
    spec = importlib.util.spec_from_file_location(name, BUGS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _prove(spec, plan):
    return prove(build_problem(spec, plan), timeout_s=120)


# -- B12: the smallest configuration ---------------------------------------------------------------

def test_b12_missing_norm_grad_allreduce_is_refuted():
    cx = assert_refuted("B12", goal="grad:norm")
    assert cx.ratio is None and cx.rank == {"tp": 0}     # each rank holds its own tokens' share
    assert "norm" in cx.others and "grad:head" not in cx.others


def test_b12_fixed_is_certified(tmp_path):
    assert_certified("B12", tmp_path)


def test_b12_buggy_gradient_is_each_ranks_token_share():
    # the buggy per-rank gradient is Partial over tp: its sum over the two ranks is the spec's
    from spec_lang.evaluate import evaluate, sample_inputs
    problem = load(BUGS / "B12_buggy.py")
    goal = next(g for g in problem.goals if g.name == "grad:norm")
    inputs = sample_inputs([goal.expected, goal.actual], problem.binding,
                           __import__("numpy").random.default_rng(3))
    vals = evaluate([goal.expected, goal.actual], problem.binding, inputs)
    spec_g, plan_g = vals[goal.expected], vals[goal.actual]
    assert plan_g.rank_axes == ("@tp",)
    per_rank = plan_g.transpose_to(("@tp", "H"))
    assert per_rank.sum(axis=0) == pytest.approx(spec_g.transpose_to(("H",)), rel=1e-9)
    assert not per_rank[0] == pytest.approx(per_rank[1])


# -- B12, the class: sizes, axes, and the library's typing -----------------------------------------

def _sp_head(tp: int, seq: int, reduce_axes: tuple[str, ...], dp: int = 1):
    """B12's spec and an SP plan on Mesh(dp, tp) whose gamma gradient gets ``reduce_axes``."""
    B, S, H, V = Dim("B", 2 * dp), Dim("S", seq), Dim("H", 2), Dim("V", 2 * tp)
    nd = SimpleNamespace(B=B, S=S, V=V)

    def head_loss(p, d):
        y = ops.rms_norm(d["x"], p["norm"], H, 1e-5)
        return ops.cross_entropy(ops.einsum(y, p["head"], out=(B, S, V)), d["labels"],
                                 d["mask"], V)

    spec = Spec(params={"norm": (H,), "head": (H, V)},
                data={"x": real(B, S, H), "labels": index(B, S, range=V), "mask": mask(B, S)},
                forward=head_loss, optimizer=SGD())

    def forward(p, d):
        y = gather_from_sp_region(ops.rms_norm(d["x"], p["norm"], H, 1e-5), S, TP)
        ce = vocab_parallel_cross_entropy(ops.einsum(y, p["head"], out=(B, S, V)),
                                          d["labels"], nd)
        local = ops.sum(d["mask"] * ce) / all_reduce(ops.sum(d["mask"]), DP)
        return Loss(backward=local, report=all_reduce(local, DP))

    def reduce_grads(name, g):
        if name == "norm":
            for a in reduce_axes:
                g = all_reduce(g, a)
        return all_reduce(g, DP)

    batch = {DP: Shard(B)}
    return spec, Plan(mesh=Mesh(dp=dp, tp=tp),
                      placements={"x": {DP: Shard(B), TP: Shard(S)}, "labels": batch,
                                  "mask": batch, "head": {TP: Shard(V)}},
                      forward=forward, reduce_grads=reduce_grads)


@pytest.mark.parametrize("tp,seq,dp", [(2, 2, 1), (4, 4, 1), (2, 4, 2), (4, 8, 2)])
def test_b12_class_sizes(tp, seq, dp):
    assert _prove(*_sp_head(tp, seq, (TP,), dp)).verdict == "EQUIVALENT"
    r = _prove(*_sp_head(tp, seq, (), dp))
    assert r.verdict == "NOT EQUIVALENT" and r.counterexample.goal == "grad:norm"
    assert r.counterexample.ratio is None


def test_b12_class_reduced_over_the_wrong_axis_is_refuted():
    # Mesh(dp=2, tp=2): gamma's partial gradient summed over dp (twice) but never over tp
    r = _prove(*_sp_head(2, 4, (DP,), dp=2))
    assert r.verdict == "NOT EQUIVALENT" and r.counterexample.goal == "grad:norm"


def test_b12_partial_type_is_derived_from_placements():
    # the library's typing: gamma (Replicate on tp, gradient varying over tp) is Partial[tp];
    # the head (Shard(V) on tp) is not, whatever its gradient's variance
    spec, plan = _sp_head(2, 2, (TP,))
    seen = {}

    def spy(name, g):
        seen[name] = partial_grad_axes(g, plan.placements.get(name, {}))
        return g

    build_problem(spec, Plan(mesh=plan.mesh, placements=plan.placements, forward=plan.forward,
                             reduce_grads=spy))
    assert seen == {"norm": ("tp",), "head": ()}


def test_b12_mutant_one_layer_norm_unreduced_in_debug_llama():
    # tests/spec_lang/plans/debug_tp_sp.py with layer 1's ffn_norm left unreduced
    base = load(ROOT / "tests/spec_lang/plans/debug_tp_sp.py")
    assert prove(base, timeout_s=120).verdict == "EQUIVALENT"
    mod = importlib.util.module_from_spec(importlib.util.spec_from_file_location(
        "debug_tp_sp", ROOT / "tests/spec_lang/plans/debug_tp_sp.py"))
    mod.__spec__.loader.exec_module(mod)

    def reduce_grads(name, g):
        return g if name == "layers.1.ffn_norm" else mod.reduce_grads(name, g)

    plan = Plan(mesh=mod.plan.mesh, placements=mod.plan.placements, forward=mod.plan.forward,
                reduce_grads=reduce_grads)
    r = _prove(mod.spec, plan)
    assert r.verdict == "NOT EQUIVALENT"
    assert r.counterexample.goal == "grad:layers.1.ffn_norm"
    assert all(not o.startswith("grad:") for o in r.counterexample.others)


def test_b12_mutant_library_sp_without_norm_reduction():
    model = llama(DEBUG)
    r = _prove(model.spec(AdamW()), megatron(
        model, tp=2, dp=1, microbatches=2,
        settings=MegatronSettings(sp=True, sp_grad_reduce_axes=())))
    assert r.verdict == "NOT EQUIVALENT" and r.counterexample.goal == "grad:norm"


# -- B14: the smallest configuration and the controls ----------------------------------------------

def test_b14_extra_tp_allreduce_is_refuted():
    cx = assert_refuted("B14", goal="grad:norm", ratio=2.0)
    assert "|tp|" in cx.hint
    assert cx.others == ["norm"]                          # the head's gradient is right


def test_b14_fixed_is_certified(tmp_path):
    assert_certified("B14", tmp_path)


@pytest.mark.parametrize("tp,cp", [(2, 1), (1, 2)])
@pytest.mark.parametrize("case", ["B14_buggy", "B14_fixed"])
def test_b14_tp_alone_and_cp_alone_are_equivalent(case, tp, cp):
    # the buggy code path only runs with tp > 1 and cp > 1: the controls are correct
    assert _prove(*_module(case).build(tp=tp, cp=cp)).verdict == "EQUIVALENT"


@pytest.mark.parametrize("tp,cp,factor", [(4, 2, 4.0), (2, 4, 2.0)])
def test_b14_class_factor_is_tp(tp, cp, factor):
    # the factor is |tp|, not |cp|: at tp=4, cp=2 the gradient is 4 x the spec
    assert _prove(*_module("B14_fixed").build(tp=tp, cp=cp)).verdict == "EQUIVALENT"
    r = _prove(*_module("B14_buggy").build(tp=tp, cp=cp))
    assert r.verdict == "NOT EQUIVALENT" and r.counterexample.goal == "grad:norm"
    assert r.counterexample.ratio == pytest.approx(factor, rel=1e-9)


def test_b14_class_extra_cp_allreduce_is_refuted():
    # the same multiplicity bug on the other axis: gamma, already complete over cp, summed again
    mod = _module("B14_fixed")
    spec, plan = mod.build(tp=2, cp=2)

    def reduce_grads(name, g):
        g = plan.reduce_grads(name, g)
        return all_reduce(g, CP) if name == "norm" else g

    r = _prove(spec, Plan(mesh=plan.mesh, placements=plan.placements, forward=plan.forward,
                          reduce_grads=reduce_grads))
    assert r.verdict == "NOT EQUIVALENT" and r.counterexample.goal == "grad:norm"
    assert r.counterexample.ratio == pytest.approx(2.0)


def test_b14_mutant_library_sp_reduces_twice():
    model = llama(DEBUG)
    r = _prove(model.spec(AdamW()), megatron(
        model, tp=2, dp=1, microbatches=1,
        settings=MegatronSettings(sp=True, sp_grad_reduce_axes=(TP, TP))))
    assert r.verdict == "NOT EQUIVALENT" and r.counterexample.goal == "grad:norm"
    assert r.counterexample.ratio == pytest.approx(2.0)


def test_b14_mutant_extra_dp_allreduce_on_one_layer():
    # a replicated-over-dp gradient summed over dp again, on layers.0.attention_norm only
    model = llama(DEBUG)
    plan = megatron(model, tp=2, dp=2, microbatches=1, sp=True)

    def reduce_grads(name, g):
        g = plan.reduce_grads(name, g)
        return all_reduce(g, DP) if name == "layers.0.attention_norm" else g

    r = _prove(model.spec(AdamW()), Plan(
        mesh=plan.mesh, placements=plan.placements, forward=plan.forward,
        reduce_grads=reduce_grads, microbatches=plan.microbatches))
    assert r.verdict == "NOT EQUIVALENT"
    assert r.counterexample.goal == "grad:layers.0.attention_norm"
    assert r.counterexample.ratio == pytest.approx(2.0)
