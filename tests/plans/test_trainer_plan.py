"""The harness trainer's own plan (spec_lang/plans/trainer_plan.py): the CheckFree partition
(embedding stage + S transformer stages), M micro-batches with the loss scale 1/(M B_mb T),
per-stage clipping at 1 and Adam per stage, proved equal to the unpartitioned model with the
*same* per-stage clipping (the trainer's stated semantics, docs/trainer.md); against a spec with
one global norm it is NOT EQUIVALENT (B22's class, the trainer's intended behaviour)."""

import dataclasses
from fractions import Fraction

import pytest

from proofs.prover import prove
from spec_lang import PlanError, SpecError, build_problem, ops
from spec_lang.models import DEBUG, llama
from spec_lang.plans.trainer_plan import (
    TRAINER_ADAM, stage_groups, trainer_plan, trainer_spec,
)

# the trainer's model family at debug size: untied head, RoPE theta 10 000, RMSNorm eps 1e-5
MODEL = llama(dataclasses.replace(DEBUG, batch=4, n_layers=2, rope_theta=10000))
MODEL4 = llama(dataclasses.replace(DEBUG, batch=4, n_layers=4, rope_theta=10000))


def _prove(spec, plan):
    return prove(build_problem(spec, plan), timeout_s=60)


def test_stage_groups_are_the_trainers():
    g = stage_groups(MODEL4, 2)
    assert g["stage0"] == ["tok_embeddings", "norm", "output"]
    assert g["stage1"][0] == "layers.0.attention_norm" and g["stage1"][-1] == "layers.1.mlp.w2"
    assert all(k.startswith(("layers.2.", "layers.3.")) for k in g["stage2"])
    assert sorted(k for v in g.values() for k in v) == sorted(MODEL4.params)
    with pytest.raises(PlanError, match="S >= 2"):
        stage_groups(MODEL, 1)


@pytest.mark.parametrize("model,stages,m", [(MODEL, 2, 2), (MODEL, 2, 4), (MODEL4, 4, 2)],
                         ids=["S2_M2", "S2_M4", "S4_M2"])
def test_trainer_plan_equals_per_stage_clipped_spec(model, stages, m):
    spec = trainer_spec(model, stages, clipping="per_stage")
    r = _prove(spec, trainer_plan(model, stages, m, spec=spec))
    assert r.verdict == "EQUIVALENT", [(g.name, g.reason) for g in r.open_goals]
    names = {g.name for g in r.goals}
    assert {f"grad_norm:stage{s}" for s in range(stages + 1)} <= names
    assert "grad_norm" not in names


def test_trainer_plan_certificate_is_accepted(tmp_path):
    from proofs.certificate import certificate_of, write_certificate
    from proofs.checker import check_certificate

    spec = trainer_spec(MODEL, 2)
    r = _prove(spec, trainer_plan(MODEL, 2, 2, spec=spec))
    cert = tmp_path / "trainer.json"
    write_certificate(cert, certificate_of(r))
    res = check_certificate(cert, retrace=False)
    assert res.verdict == "EQUIVALENT" and res.checked == res.total, res.summary()


def test_global_norm_spec_is_not_the_trainer():
    # B22's class: the trainer clips each stage by its own norm; a global-norm spec differs
    spec = trainer_spec(MODEL, 2, clipping="global")
    r = _prove(spec, trainer_plan(MODEL, 2, 2, spec=spec))
    assert r.verdict == "NOT EQUIVALENT"
    cx = r.counterexample
    assert cx.goal == "grad_norm"
    assert any(abs(s - p) > 1e-6 for _, s, p in cx.values)
    # raw gradients agree (clipping is after them); the updates differ
    assert all(not o.startswith("grad:") for o in cx.others)
    assert any(o.startswith("exp_avg:") or o.startswith("layers.") for o in cx.others)


def test_wrong_max_norm_is_refuted():
    # the plan clips each stage at 2 instead of the trainer's 1 (Plan.clip_grad_norm): clipping
    # is active at these sizes, so the per-stage coefficients and every update differ
    spec = trainer_spec(MODEL, 2, clipping="per_stage", max_norm=Fraction(1, 100))
    plan = dataclasses.replace(trainer_plan(MODEL, 2, 2, spec=spec), clip_grad_norm=Fraction(1, 50))
    r = _prove(spec, plan)
    assert r.verdict == "NOT EQUIVALENT"
    assert r.counterexample.goal.startswith(("exp_avg", "layers.", "norm", "output", "tok_"))


def test_wrong_loss_scale_is_refuted():
    # dividing each micro-batch's summed loss by its own tokens (B_mb T), not the iteration's
    # (M B_mb T): every gradient is M x, the reported loss too
    spec = trainer_spec(MODEL, 2, clipping="none")
    plan = trainer_plan(MODEL, 2, 2, spec=spec)
    mb = ops.axis_size("mb")
    from spec_lang.pipeline import Pipeline, stage

    pipe = plan.schedule
    last = pipe.stages[-1]
    scaled = stage(lambda p, d, io: mb * last.forward(p, d, io), list(last.params))
    pipe2 = Pipeline(list(pipe.stages[:-1]) + [scaled], schedule=pipe.schedule)
    bad = dataclasses.replace(plan, forward=pipe2.forward, schedule=pipe2)
    r = _prove(spec, bad)
    assert r.verdict == "NOT EQUIVALENT"
    assert r.counterexample.goal == "loss"
    assert r.counterexample.ratio == pytest.approx(2.0)


def test_trainer_adam_is_torch_adam_without_weight_decay():
    assert TRAINER_ADAM.betas == (Fraction(9, 10), Fraction(999, 1000))
    assert TRAINER_ADAM.eps == Fraction(1, 10**8) and TRAINER_ADAM.weight_decay == 0


def test_clip_groups_must_partition_the_parameters():
    spec = trainer_spec(MODEL, 2)
    with pytest.raises(SpecError, match="partition"):
        dataclasses.replace(spec, clip_groups={"stage0": ["norm"]}, site="")
