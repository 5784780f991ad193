"""Megatron sequence parallelism in the plan library (``megatron(..., sp=True)``).

The SP plan on the debug Llama is proved EQUIVALENT (certificate re-checked); mutants of the
norm-weight gradient reduction and of the SP regions are refuted by the prover with the goal
and factor named. Which gradients are Partial over tp is derived from placements and the traced
gradient (``partial_grad_axes``), so the tests also pin that set.
"""

from __future__ import annotations

import sys
from dataclasses import replace

import pytest

from proofs.certificate import certificate_of, write_certificate
from proofs.checker import check_certificate
from proofs.prover import prove
from spec_lang import AdamW, PlanError, build_problem, load
from spec_lang.models import DEBUG, llama
from spec_lang.plans import MegatronSettings, megatron
from tests.bugs.cases import ROOT

MEG = sys.modules["spec_lang.plans.megatron"]
EXAMPLE = ROOT / "examples" / "llama_debug_megatron_sp.py"
NORMS = {"layers.0.attention_norm", "layers.0.ffn_norm", "layers.1.attention_norm",
         "layers.1.ffn_norm", "norm"}

model = llama(DEBUG)
spec = model.spec(AdamW())


def _prove_plan(settings: MegatronSettings, *, tp=2, dp=2, k=2):
    plan = megatron(model, tp=tp, dp=dp, microbatches=k, settings=settings)
    return prove(build_problem(spec, plan), timeout_s=120)


def test_sp_example_is_certified(tmp_path):
    report = prove(load(EXAMPLE), timeout_s=120)
    assert report.verdict == "EQUIVALENT", [(g.name, g.reason) for g in report.open_goals()]
    cert = tmp_path / "sp.cert.json"
    write_certificate(cert, certificate_of(report))
    result = check_certificate(cert, retrace=True, plan_path=EXAMPLE)
    assert result.verdict == "EQUIVALENT" and result.checked == result.total == 85


def test_partial_gradients_are_exactly_the_norm_weights(monkeypatch):
    seen: dict[str, tuple[str, ...]] = {}
    orig = MEG.partial_grad_axes

    def spy(g, placement, axes=("tp",)):
        out = orig(g, placement, axes)
        seen[g.name.removeprefix("grad:")] = out
        return out

    monkeypatch.setattr(MEG, "partial_grad_axes", spy)
    build_problem(spec, megatron(model, tp=2, dp=2, microbatches=2, sp=True))
    assert {n for n, a in seen.items() if a} == NORMS
    assert all(a == ("tp",) for n, a in seen.items() if n in NORMS)
    assert len(seen) == len(model.params)           # every gradient was typed


@pytest.mark.parametrize("dp,k", [(1, 1), (2, 2)])
def test_sp_plan_is_equivalent_across_sizes(dp, k):
    assert _prove_plan(MegatronSettings(sp=True), dp=dp, k=k).verdict == "EQUIVALENT"


@pytest.mark.parametrize("reduces,ratio,dp", [
    ((), None, 1),              # norm-grad all-reduce dropped: each rank keeps its tokens' sum
    ((), None, 2),
    (("tp", "tp"), 2.0, 1),     # all-reduced twice: tp x the spec
    (("tp", "tp"), 2.0, 2),
    (("dp",), None, 2),         # reduced over the wrong axis (dp): still partial over tp
])
def test_norm_grad_reduction_mutants_are_refuted(reduces, ratio, dp):
    r = _prove_plan(MegatronSettings(sp=True, sp_grad_reduce_axes=reduces), dp=dp, k=1)
    assert r.verdict == "NOT EQUIVALENT"
    cx = r.counterexample
    # the first diverging goal is a norm-weight gradient; weights that are not norms agree
    assert cx.goal.removeprefix("grad:") in NORMS and cx.goal.startswith("grad:"), cx.goal
    diverging = {g.removeprefix("grad:") for g in [cx.goal, *cx.others] if g.startswith("grad:")}
    assert diverging <= NORMS
    if ratio is None:
        assert cx.ratio is None
        assert any(abs(s - p) > 1e-9 for _, s, p in cx.values)
    else:
        assert cx.ratio == pytest.approx(ratio, rel=1e-9)


def test_head_gather_with_split_backward_is_refuted():
    # entering the column-parallel layers with gather_from_tp's split backward drops the
    # reduce-scatter of the ranks' partial input gradients
    r = _prove_plan(MegatronSettings(sp=True, gather_from_sp=("all_gather", "split")), k=1)
    assert r.verdict == "NOT EQUIVALENT"
    assert r.counterexample.goal.startswith("grad:")


def test_reduce_scatter_on_the_wrong_dim_is_a_plan_error():
    # reduce-scattering H instead of S leaves a residual stream sharded on H next to one
    # sharded on S: the placement types disagree, reported at the plan's line
    with pytest.raises(PlanError, match=r"llama.py:\d+: mul: dim H is placed as H\[tp\]"):
        build_problem(spec, megatron(model, tp=2, dp=1, microbatches=1,
                                     settings=MegatronSettings(sp=True, sp_dim="H")))


def test_sp_off_is_the_tp_plan():
    s = MegatronSettings()
    assert not s.sp and replace(s, sp=True).sp
    r = _prove_plan(MegatronSettings(sp=False, sp_grad_reduce_axes=()), dp=1, k=1)
    assert r.verdict == "EQUIVALENT"        # the SP knobs are inert without sp


def test_sp_with_replicated_kv_heads_is_equivalent():
    # kv_heads < tp: wk/wv enter the TP region through copy_to_tp on the weight; their
    # gradients are complete (not Partial), so only the norms get the SP all-reduce
    kvrep = llama(replace(DEBUG, name="debug_kvrep", n_kv_heads=1))
    r = prove(build_problem(kvrep.spec(AdamW()),
                            megatron(kvrep, tp=2, dp=2, microbatches=2, sp=True)), timeout_s=120)
    assert r.verdict == "EQUIVALENT"


@pytest.mark.parametrize("reduces,verdict", [(("tp",), "EQUIVALENT"), ((), "NOT EQUIVALENT")])
def test_sp_at_tp8_on_one_8b_layer(reduces, verdict):
    from spec_lang.models import LLAMA3_8B
    m = llama(replace(LLAMA3_8B, n_layers=1))
    r = prove(build_problem(m.spec(AdamW()), megatron(
        m, tp=8, dp=4, microbatches=2,
        settings=MegatronSettings(sp=True, sp_grad_reduce_axes=reduces))), timeout_s=120)
    assert r.verdict == verdict
    if reduces == ():
        assert r.counterexample.goal == "grad:norm"
