"""Model recipes beyond Llama (issue 12, item 4): GPT-2, Mixtral and Qwen2 prove under the
library's plan builders and under a Megatron plan written by hand; their mutants are refuted;
the configurations have the published parameter counts."""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction
from pathlib import Path

import pytest

from proofs.prover import prove
from spec_lang import AdamW, PlanError, build_problem, load, megatron_param_groups
from spec_lang import weight_decay_groups
from spec_lang.models import (
    GPT2_DEBUG, GPT2_SMALL, MIXTRAL_8X7B, MIXTRAL_DEBUG, QWEN2_0_5B, QWEN2_7B, QWEN2_DEBUG,
    TransformerModel, gpt2, mixtral, model_registry, qwen2,
)
from spec_lang.plans import MegatronSettings, expert_parallel, megatron
from spec_lang.plans.library import moe_megatron
from spec_lang.plans.torchtitan import TorchtitanSettings, megatron_3d

ROOT = Path(__file__).resolve().parents[2]


def _verdict(spec, plan, *, method_counts=False):
    r = prove(build_problem(spec, plan), timeout_s=300)
    if method_counts:
        return r.verdict, r.counts
    return r.verdict


# -- GPT-2: the plan, written either way ----------------------------------------------------

@pytest.mark.parametrize("name", ["gpt2_debug_megatron", "gpt2_debug_megatron_by_hand"])
def test_gpt2_tp_dp_microbatches_proves_by_rewriting_alone(name):
    r = prove(load(ROOT / "examples" / f"{name}.py"), timeout_s=300)
    assert r.verdict == "EQUIVALENT", [(g.name, g.reason) for g in r.open_goals][:3]
    assert r.counts["smt"] == 0 and r.counts["total"] == 145


def test_gpt2_target_logit_as_an_einsum_proves_too(tmp_path):
    src = (ROOT / "examples" / "gpt2_debug_megatron_by_hand.py").read_text()
    old = 'ops.sum(z * ops.one_hot(labels, d.V, shards=(TP,)), d.V)'
    assert old in src
    p = tmp_path / "einsum.py"
    p.write_text(src.replace(old, "ops.einsum(z, ops.one_hot(labels, d.V, shards=(TP,)), "
                                  "out=(d.B, d.S))"))
    r = prove(load(p), timeout_s=300)
    assert r.verdict == "EQUIVALENT" and r.counts["smt"] == 0


@pytest.mark.parametrize("what, old, new", [
    ("target logit not reduced over tp",
     'target = region(target, "reduce_from_tp", *G_, TP)', "target = target"),
    ("f declared with an identity backward", 'F_ = ("identity", "all_reduce")',
     'F_ = ("identity", "identity")'),
    ("no DDP pre-factor", "return ops.axis_size(DP) * ops.sum(mask * ce) / n",
     "return ops.sum(mask * ce) / n"),
])
def test_gpt2_hand_written_mutants_are_refuted(tmp_path, what, old, new):
    src = (ROOT / "examples" / "gpt2_debug_megatron_by_hand.py").read_text()
    assert old in src, what
    p = tmp_path / "mutant.py"
    p.write_text(src.replace(old, new))
    assert prove(load(p), timeout_s=300).verdict == "NOT EQUIVALENT", what


def test_gpt2_pipeline_needs_the_tied_embedding_reduced_over_pp():
    model = gpt2(GPT2_DEBUG)
    spec = model.spec(AdamW())
    bad = megatron_3d(model, tp=2, dp=2, pp=2, microbatches=2,
                      settings=TorchtitanSettings(tied_reduce=False))
    r = prove(build_problem(spec, bad), timeout_s=300)
    assert r.verdict == "NOT EQUIVALENT"
    assert r.counterexample.goal in ("grad:wte", "wte", "exp_avg:wte", "exp_avg_sq:wte")


def test_gpt2_erf_form_normalises_equal_under_tp():
    """The exact (erf) GELU: every goal reaches one normal form (its certificate:
    tests/proofs/test_erf_certificate.py)."""
    from rewriting import Normaliser, normalise

    model = gpt2(dataclasses.replace(GPT2_DEBUG, gelu="none"))
    prob = build_problem(model.spec(AdamW()), megatron(model, tp=2, dp=1, microbatches=1))
    n = Normaliser(prob.binding)
    for g in prob.goals:
        (e, a), _ = normalise([g.expected, g.actual], prob.binding, normaliser=n)
        assert e is a, g.name


# -- Mixtral and Qwen2 -----------------------------------------------------------------------------

@pytest.mark.parametrize("build", [
    lambda m: megatron(m, tp=2, dp=2, microbatches=2),
    lambda m: expert_parallel(m, dp=2, ep=2),
], ids=["megatron", "expert_parallel"])
def test_mixtral_proves(build):
    model = mixtral(MIXTRAL_DEBUG)
    assert _verdict(model.spec(AdamW()), build(model)) == "EQUIVALENT"


def test_mixtral_routing_counts_must_be_global():
    model = mixtral(MIXTRAL_DEBUG)
    bad = moe_megatron(model, tp=2, dp=2, microbatches=2, routing_count_axes=())
    assert _verdict(model.spec(AdamW()), bad) == "NOT EQUIVALENT"


@pytest.mark.parametrize("build", [
    lambda m: megatron(m, tp=2, dp=2, microbatches=2),
    lambda m: megatron_3d(m, tp=2, dp=2, pp=2, microbatches=2),
], ids=["megatron", "megatron_3d"])
def test_qwen2_with_biases_and_a_tied_head_proves(build):
    model = qwen2(QWEN2_DEBUG)
    assert _verdict(model.spec(AdamW()), build(model)) == "EQUIVALENT"


def test_qwen2_column_parallel_biases_need_f():
    model = qwen2(QWEN2_DEBUG)
    bad = megatron(model, tp=2, dp=2, microbatches=2,
                   settings=MegatronSettings(copy_to_tp=("identity", "identity")))
    assert _verdict(model.spec(AdamW()), bad) == "NOT EQUIVALENT"


# -- parameter groups as torch and Megatron build them ----------------------------------------------

def test_weight_decay_groups_split_by_rank():
    model = gpt2(GPT2_DEBUG)
    g = weight_decay_groups(model.params, AdamW(weight_decay=Fraction(1, 10)))
    assert g.for_param("layers.0.attn.q.weight").weight_decay == Fraction(1, 10)
    assert g.for_param("wte").weight_decay == Fraction(1, 10)
    for n in ("layers.0.attn.q.bias", "layers.1.ln_2.bias", "ln_f.weight", "layers.0.mlp.fc.bias"):
        assert g.for_param(n).weight_decay == 0, n
    m = megatron_param_groups(model.params, AdamW(lr=Fraction(6, 10000)),
                              scale_lr_cond=lambda n, dims: n == "wte", lr_mult=Fraction(1, 2))
    assert m.for_param("wte").lr == Fraction(3, 10000)
    assert m.for_param("layers.0.attn.q.bias").weight_decay == 0    # (NH, HD): 2-D but a bias
    assert m.for_param("layers.0.attn.q.weight").lr == Fraction(6, 10000)


def test_a_plan_that_decays_the_biases_is_refuted():
    model = gpt2(GPT2_DEBUG)
    spec = model.spec(weight_decay_groups(model.params, AdamW()))
    ok = megatron(model, tp=2, dp=2, microbatches=2)
    assert _verdict(spec, ok) == "EQUIVALENT"
    bad = dataclasses.replace(ok, optimizer=AdamW())
    r = prove(build_problem(spec, bad), timeout_s=300)
    assert r.verdict == "NOT EQUIVALENT"


def test_megatron_groups_reject_an_optimizer_without_the_fields():
    class Odd:
        def update(self, *a, **k):
            return {}

    with pytest.raises(Exception, match="test_recipes.py:.*no weight_decay"):
        megatron_param_groups({"b.bias": ("H",)}, Odd())


# -- the protocol and the configurations ------------------------------------------------------------

@pytest.mark.parametrize("name", ["gpt2_debug", "mixtral_debug", "qwen2_debug", "debug",
                                  "moe_debug"])
def test_registry_models_follow_the_protocol(name):
    assert isinstance(model_registry(name), TransformerModel)


def test_a_model_without_the_protocol_is_a_plan_error_naming_the_line():
    with pytest.raises(PlanError, match=r"test_recipes\.py:\d+: megatron\(\) needs a model "
                                        r"following spec_lang\.models\.protocol"):
        megatron(object(), tp=2, dp=2, microbatches=2)


@pytest.mark.parametrize("config, make, expected", [
    (GPT2_SMALL, gpt2, 124_439_808 + (50304 - 50257) * 768),   # HF GPT-2 124M, vocab padded
    (QWEN2_7B, qwen2, 7_615_616_512),                          # Qwen2-7B (HF model card)
    (QWEN2_0_5B, qwen2, 494_032_768),                          # Qwen2-0.5B, tied head
    (MIXTRAL_8X7B, mixtral, 46_702_792_704),                   # Mixtral 8x7B (total)
])
def test_parameter_counts_are_the_published_ones(config, make, expected):
    m = make(config)
    assert sum(math.prod(d.size for d in dims) for dims in m.params.values()) == expected
