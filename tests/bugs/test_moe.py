"""CASES.md section 5, MoE: B28 (router load-balancing loss under context parallelism).

Class rule: a side loss injected per rank as a Partial term must be pre-multiplied by the size of
every group that later averages it. Generalised over cp, alpha, the scale, and the
expert-parallel MoE plan (aux loss and expert gradients over dp x ep).
"""

from __future__ import annotations

import importlib.util
from fractions import Fraction

import pytest

from proofs.prover import prove
from spec_lang import build_problem
from tests.bugs.cases import BUGS, assert_certified, assert_refuted

ROUTER = "grad:layers.0.moe.router"


def _module(name: str):
    spec = importlib.util.spec_from_file_location(f"_case_{name}", BUGS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _prove(spec_plan):
    return prove(build_problem(*spec_plan), timeout_s=60)


def test_b28_aux_loss_not_scaled_by_cp_is_refuted():
    assert_refuted("B28", goal=ROUTER, ratio=0.5)      # main loss zeroed: the aux part, 1/cp


def test_b28_with_the_main_loss_is_refuted_by_values():
    r = _prove(_module("B28_buggy").build(cp=2, main_loss=True))
    assert r.verdict == "NOT EQUIVALENT" and r.counterexample.goal == ROUTER
    assert r.counterexample.ratio is None             # main + aux/cp: not a constant factor
    assert any(abs(s - p) > 1e-9 * max(1.0, abs(s)) for _, s, p in r.counterexample.values)


def test_b28_fixed_is_certified(tmp_path):
    assert_certified("B28", tmp_path)


@pytest.mark.parametrize("cp", [2, 4])
def test_b28_aux_part_of_the_router_gradient_is_one_over_cp(cp):
    """Main loss zeroed (CASES.md): the router gradient is alpha * grad(A) / cp."""
    r = _prove(_module("B28_buggy").build(cp=cp, main_loss=False))
    assert r.verdict == "NOT EQUIVALENT"
    assert r.counterexample.goal == ROUTER
    assert r.counterexample.ratio == pytest.approx(1 / cp, rel=1e-9)
    assert f"= {1 / cp:.3f} x spec" in r.counterexample.render()


# with the main loss at |B| = 1 (fixed, was a strict xfail since stop 19): the experts'
# gradients had two normal forms after einsum-unit-dim until squeeze-elementwise sank the squeezes
@pytest.mark.parametrize("cp,alpha,main", [
    (2, Fraction(1, 10), True), (4, Fraction(1, 2), True), (2, Fraction(3, 1000), False)])
def test_b28_fixed_scale_is_equivalent_for_other_cp_and_alpha(cp, alpha, main):
    r = _prove(_module("B28_fixed").build(cp=cp, alpha=alpha, main_loss=main))
    assert r.verdict == "EQUIVALENT", [(g.name, g.reason) for g in r.open_goals]


def test_b28_mutant_aux_scaled_twice_is_refuted():
    """Mutant: alpha * cp^2 * A_c (the cp factor applied by both the engine and the loss)."""
    r = _prove(_module("B28_buggy").build(cp=2, main_loss=False, aux_scale=4))
    assert r.verdict == "NOT EQUIVALENT" and r.counterexample.goal == ROUTER
    assert r.counterexample.ratio == pytest.approx(2.0, rel=1e-9)


def test_b28_mutant_aux_scaled_by_the_sequence_length_is_refuted():
    """Mutant: the aux term injected at the main loss's token-count scale cp/N (per-token mode
    rescaling of a sum that is already global): values differ at the router."""
    from spec_lang import ops
    r = _prove(_module("B28_buggy").build(cp=2, main_loss=True, aux_scale=ops.dim_size("S")))
    assert r.verdict == "NOT EQUIVALENT" and r.counterexample.goal == ROUTER


# -- the class on the expert-parallel MoE plan (dp x ep averages the Partial aux term) -----------

def _ep(settings, **cfg):
    import dataclasses

    from spec_lang import SGD
    from spec_lang.models.moe import MOE_DEBUG, moe
    from spec_lang.plans.expert_parallel import expert_parallel
    model = moe(dataclasses.replace(MOE_DEBUG, **cfg))
    return _prove((model.spec(SGD()), expert_parallel(model, dp=2, ep=2, settings=settings)))


@pytest.mark.parametrize("axes,ratio", [((("dp", 1),), 0.5), ((("ep", 1),), 0.5), ((), 0.25)])
def test_ep_aux_prefactor_missing_a_group_is_refuted_with_the_group_factor(axes, ratio):
    """Top-1 with normalised weights: the main loss does not reach the router, so the router
    gradient is the aux part alone; a pre-factor missing |dp| or |ep| leaves 1/2, none 1/4."""
    from spec_lang.plans.expert_parallel import EPSettings, Scale
    r = _ep(EPSettings(aux_scale=Scale("mutant", axes, "mutant")), top_k=1, routed_scaling=1)
    assert r.verdict == "NOT EQUIVALENT" and r.counterexample.goal == ROUTER
    assert r.counterexample.ratio == pytest.approx(ratio, rel=1e-6)


def test_ep_aux_prefactor_with_softmax_gating_and_main_loss_is_refuted():
    from spec_lang.plans.expert_parallel import EPSettings, Scale
    r = _ep(EPSettings(aux_scale=Scale("dp", (("dp", 1),), "mutant")), gating="softmax",
            norm_topk_prob=False, balance_bias=False)
    assert r.verdict == "NOT EQUIVALENT" and r.counterexample.goal == ROUTER
    assert r.counterexample.ratio is None


def test_b28_refutation_certificate_is_replayed(tmp_path):
    """The NOT EQUIVALENT certificate (small enough for the full schema check, with TOPK_MASK
    nodes) is accepted: the refuted goal re-evaluates and diverges."""
    from proofs.certificate import certificate_of, write_certificate
    from proofs.checker import check_certificate
    from tests.bugs.cases import prove_case
    report = prove_case("B28_buggy")
    cert = tmp_path / "b28_buggy.json"
    write_certificate(cert, certificate_of(report))
    res = check_certificate(cert, retrace=True, plan_path=BUGS / "B28_buggy.py")
    assert res.verdict == "NOT EQUIVALENT", res.summary()
