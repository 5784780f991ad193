"""Expert parallelism (spec_lang/plans/expert_parallel.py): the debug MoE model at EP2 x DP2 is
certified; mutants of the scale factors, groups and the dispatch / combine pair are rejected."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from proofs.certificate import certificate_of, write_certificate
from proofs.checker import check_certificate
from proofs.prover import prove
from spec_lang import SGD, AdamW, PlanError, build_problem, load
from spec_lang.models.moe import MOE_DEBUG, MoEContext, moe
from spec_lang.plans import megatron
from spec_lang.plans.expert_parallel import (
    EPSettings, ExpertParallel, Scale, ep_placements, expert_parallel,
)
from spec_lang.term import Op, walk

ROOT = Path(__file__).resolve().parents[2]
ROUTER = "grad:layers.0.moe.router"
W2 = "grad:layers.0.moe.experts.w2"


def _prove(model, **kw):
    spec = model.spec(SGD())
    return prove(build_problem(spec, expert_parallel(model, **kw)), timeout_s=120)


def test_example_is_certified_and_uses_the_all_to_all(tmp_path):
    problem = load(ROOT / "examples" / "moe_debug_ep.py")
    ops = {n.op for g in problem.goals for n in walk(g.actual)}
    assert Op.ALL_TO_ALL in ops and Op.TOPK_MASK in ops and Op.PERMUTE in ops
    report = prove(problem, timeout_s=120)
    assert report.verdict == "EQUIVALENT", [(g.name, g.reason) for g in report.open_goals()]
    cert = tmp_path / "ep.json"
    write_certificate(cert, certificate_of(report))
    res = check_certificate(cert, retrace=True, plan_path=ROOT / "examples" / "moe_debug_ep.py")
    assert res.verdict == "EQUIVALENT" and res.checked == res.total == len(problem.goals)


@pytest.mark.parametrize("cfg", [
    dict(gating="softmax", norm_topk_prob=False, balance_bias=False, top_k=1),   # Switch-style
    dict(n_shared_experts=0, routed_scaling=1, top_k=3),
])
@pytest.mark.parametrize("dp,ep", [(1, 2), (1, 4)])
def test_other_gatings_and_sizes_are_equivalent(cfg, dp, ep):
    model = moe(dataclasses.replace(MOE_DEBUG, **cfg))
    r = _prove(model, dp=dp, ep=ep)
    assert r.verdict == "EQUIVALENT", [(g.name, g.reason) for g in r.open_goals()]


@pytest.mark.parametrize("dp,ep,k", [(2, 2, 2), (1, 2, 4)])
def test_microbatches_accumulate_exactly(dp, ep, k):
    # tokens B[dp, mb, ep]: the ep block is the innermost shard the dispatch all-to-all
    # concatenates; the K micro-batch gradients are summed (spec_lang/plans/deepseek.py)
    model = moe(dataclasses.replace(MOE_DEBUG, batch=dp * ep * k))
    plan = expert_parallel(model, dp=dp, ep=ep, microbatches=k)
    assert plan.microbatches.k == k
    r = _prove(model, dp=dp, ep=ep, microbatches=k)
    assert r.verdict == "EQUIVALENT", [(g.name, g.reason) for g in r.open_goals]


def test_microbatches_with_expert_grads_over_ep_are_refuted():
    model = moe(dataclasses.replace(MOE_DEBUG, batch=8))
    r = _prove(model, dp=2, ep=2, microbatches=2,
               settings=EPSettings(expert_grad_axes=("dp", "ep")))
    assert r.verdict == "NOT EQUIVALENT" and r.counterexample.goal == W2


def test_microbatches_must_be_a_positive_integer():
    with pytest.raises(PlanError, match=r"test_ep\.py:\d+: expert_parallel\(microbatches=0\)"):
        expert_parallel(moe(MOE_DEBUG), dp=2, ep=2, microbatches=0)


NO_SCALE = Scale("1", (), "mutant: no pre-factor")
MUTANTS = {
    # the aux term is Partial over dp x ep and is averaged with the gradients (B28's class)
    "aux_loss_not_prescaled": (EPSettings(aux_scale=NO_SCALE), ROUTER, None),
    # expert gradients summed over ep too: other ranks' experts are added in
    "expert_grad_over_dp_and_ep": (EPSettings(expert_grad_axes=("dp", "ep")), W2, None),
    # expert gradients averaged over the expert-data-parallel group only (1/dp, not 1/(dp ep))
    "expert_grad_scale_1_over_dp": (
        EPSettings(expert_grad_scale=Scale("1/dp", (("dp", -1),), "mutant")), W2, 2.0),
    # combine without the inverse of the dispatcher's token permutation
    "combine_without_unpermute": (EPSettings(unpermute=False), "loss", None),
    # dense gradients not reduced over ep (only over dp)
    "dense_grad_not_over_ep": (EPSettings(dense_grad_axes=("dp",)), "grad:output", None),
}


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_mutant_is_rejected(name):
    settings, goal, ratio = MUTANTS[name]
    r = _prove(moe(MOE_DEBUG), dp=2, ep=2, settings=settings)
    assert r.verdict == "NOT EQUIVALENT", name
    cx = r.counterexample
    assert cx.goal == goal, (name, cx.goal, cx.others)
    if ratio is None:
        assert any(abs(s - p) > 1e-9 * max(1.0, abs(s)) for _, s, p in cx.values)
    else:
        assert cx.ratio == pytest.approx(ratio, rel=1e-9)


def test_aux_loss_prescale_mutant_is_one_over_dp_ep_on_the_aux_part():
    """With the main loss out of the router gradient (top-1, normalised weights are 1), the aux
    part alone diverges: 1/(dp ep) = 0.25."""
    model = moe(dataclasses.replace(MOE_DEBUG, top_k=1, norm_topk_prob=True, routed_scaling=1))
    r = _prove(model, dp=2, ep=2, settings=EPSettings(aux_scale=NO_SCALE))
    assert r.verdict == "NOT EQUIVALENT" and r.counterexample.goal == ROUTER
    assert r.counterexample.ratio == pytest.approx(0.25, rel=1e-6)


def test_combine_that_is_not_the_inverse_all_to_all_is_a_type_error():
    """Static mutant: expert outputs combined without the reverse all-to-all."""
    class NoCombine(ExpertParallel):
        def combine(self, ye, d):
            return ye

    model = moe(MOE_DEBUG)
    plan = expert_parallel(model, dp=2, ep=2)
    from spec_lang.models.moe import moe_forward
    from spec_lang.plan import Loss

    def forward(p, data):
        main, aux = moe_forward(p, data, model.config, model.dims,
                                NoCombine(EPSettings(), ("dp", "ep")))
        return Loss(backward=main, report=main)
    bad = dataclasses.replace(plan, forward=forward)
    with pytest.raises(PlanError, match=r"moe\.py:\d+: einsum: dim B is placed as B\[dp\] .* "
                                        r"but as B\[dp,ep\]"):
        build_problem(model.spec(AdamW()), bad)


def test_placements_shard_tokens_over_dp_ep_and_experts_over_ep():
    model = moe(MOE_DEBUG)
    pl = ep_placements(model)
    assert set(pl["tokens"]) == {"dp", "ep"}
    assert set(pl["layers.0.moe.experts.w1"]) == {"ep"}
    assert "layers.0.moe.router" not in pl and "layers.0.moe.shared.w1" not in pl
    assert isinstance(MoEContext(), MoEContext) and megatron is not None
