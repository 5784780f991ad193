"""Regressions for the adversarial report adv2 (pipeline soundness and bad-input gaps).

Each test failed before its fix. Plan files are under ``tests/bugs/plans_adv2/``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from proofs.certificate import certificate_of, write_certificate
from proofs.checker import check_certificate
from proofs.prover import prove
from spec_lang import load
from spec_lang.errors import PlanError

PLANS = Path(__file__).resolve().parent / "plans_adv2"


def _prove(name: str):
    return prove(load(PLANS / f"{name}.py"), timeout_s=60)


# -- F1: a one-stage gradient exists only on its pp coordinate ---------------------------------
@pytest.mark.parametrize("name, line", [("pp_avg_reduce_grads", 38), ("pp_sum_reduce_grads", 38)])
def test_f1_reduce_grads_over_pp_on_stage_gradient_is_a_plan_error(name, line):
    """reduce_grads all-reduces grad w0 (held by stage 0 only) over pp: on hardware the pp
    group mixes stage 0's buffer with stage 1's (grad w1). Was EQUIVALENT (avg and sum)."""
    with pytest.raises(PlanError, match=rf"{name}\.py:{line}: reduce_grads applies ALL_REDUCE "
                       r"over 'pp' to grad:w0, which only pipeline stage 0 holds"):
        _prove(name)


def test_f1_schedule_hook_over_pp_on_stage_buffer_is_a_plan_error():
    """A buffer collective(PP) in the schedule on a one-stage buffer. Was EQUIVALENT (P01)."""
    with pytest.raises(PlanError, match=r"pp_avg_schedule_hook\.py:37: stage 0 runs a buffer "
                       r"collective over 'pp' \(AR_avg\[pp\]\) on grad:w0"):
        _prove("pp_avg_schedule_hook")


@pytest.mark.parametrize("name", ["stage_norm_no_pp", "stage_norm_two_stages_no_comm"])
def test_f1_norm_reading_other_stages_gradients_is_refuted(name):
    """grad_norm_sq reads every stage's gradients without a pp reduction: on hardware each
    stage only has its own (B22's per-stage norm). Was EQUIVALENT (K04)."""
    r = _prove(name)
    assert r.verdict == "NOT EQUIVALENT", r.verdict
    cx = r.counterexample
    assert cx.goal == "grad_norm", cx.goal
    assert any(abs(s - p) > 1e-6 for _, s, p in cx.values), cx.render()


def test_f1_global_norm_with_pp_reduction_is_certified(tmp_path):
    """global_grad_norm_sq(grads, pp=PP): each stage's own squared norm, summed over pp."""
    plan = PLANS / "stage_norm_pp_kw.py"
    r = prove(load(plan), timeout_s=60)
    assert r.verdict == "EQUIVALENT", (r.verdict, [(g.name, g.reason) for g in r.open_goals])
    cert = tmp_path / "norm.cert.json"
    write_certificate(cert, certificate_of(r))
    res = check_certificate(cert, retrace=True, plan_path=plan)
    assert res.verdict == "EQUIVALENT" and res.checked == res.total


def test_f1_held_gradient_is_zero_off_its_stage():
    """The model itself: grad_norm_sq receives RANK_CONST(pp, e_s) * g for a one-stage
    parameter, so on the other stage the gradient is 0 (evaluated, not just structural)."""
    import numpy as np

    from spec_lang import SGD, Dim, Mesh, Plan, Spec, build_problem, ops, real
    from spec_lang.evaluate import evaluate
    from spec_lang.pipeline import Pipeline, stage
    from spec_lang.schedules import one_f_one_b

    H = Dim("H", 2)
    seen = {}

    def s0(p, d, io):
        io.send(ops.sum(p["w0"] * d["a"]))

    def s1(p, d, io):
        return io.recv() + ops.sum(p["w1"] * d["b"])

    spec = Spec(params={"w0": (H,), "w1": (H,)}, data={"a": real(H), "b": real(H)},
                forward=lambda p, d: ops.sum(p["w0"] * d["a"]) + ops.sum(p["w1"] * d["b"]),
                optimizer=SGD(lr=1), clip_grad_norm=1)
    pipe = Pipeline([stage(s0, ["w0"]), stage(s1, ["w1"])], schedule=one_f_one_b(2, 1))

    def norm_sq(grads):
        seen.update(grads)
        return ops.sum(grads["w0"] * grads["w0"])      # stage 0's own gradient only
    prob = build_problem(spec, Plan(mesh=Mesh(pp=2), forward=pipe.forward, schedule=pipe,
                                    grad_norm_sq=norm_sq))
    inputs = {"w0": np.zeros(2), "w1": np.zeros(2), "a": np.array([3.0, 0.0]),
              "b": np.array([0.0, 4.0])}
    g = evaluate([seen["w0"].term], prob.binding, inputs)[seen["w0"].term]
    assert g.axes == ("@pp", "H"), g.axes
    assert np.allclose(g.data, [[3.0, 0.0], [0.0, 0.0]]), g.data   # stage 0: a; stage 1: 0


# -- F2: send/recv order mismatch between stages ------------------------------------------------
def test_f2_send_order_mismatch_is_a_plan_error():
    """Stage 0 runs F0 F1, stage 1 runs F1 F0: in-order p2p pairs mb 0's activation with mb 1
    (or deadlocks with blocking sends). Was EQUIVALENT (E21)."""
    with pytest.raises(PlanError, match=r"e21_send_order_mismatch\.py:28: stage 1 runs F1 where "
                       r"virtual stage 0 sent micro-batch 0 \(F order 0 1 on virtual stage 0, "
                       r"1 0 on virtual stage 1\)"):
        _prove("e21_send_order_mismatch")


def test_f2_backward_order_mismatch_is_a_plan_error():
    """The gradients go the other way: stage 1 runs B1 B0, stage 0 B0 B1."""
    from spec_lang.schedules import B, F, gpipe, validate
    sch = gpipe(2, 2).with_stage(1, [F(0), F(1), B(1), B(0)])
    with pytest.raises(PlanError, match=r"test_adv2_regressions\.py:\d+: stage 0 runs B0 where "
                       r"virtual stage 1 sent micro-batch 1 \(B order 1 0"):
        validate(sch, "x.py:1")


@pytest.mark.parametrize("pp, m, v", [(2, 2, 1), (2, 4, 2), (4, 4, 2), (3, 6, 1)])
def test_f2_published_schedules_pass_the_order_check(pp, m, v):
    from spec_lang.schedules import gpipe, interleaved_one_f_one_b, one_f_one_b, validate
    validate(gpipe(pp, m))
    validate(one_f_one_b(pp, m))
    if m % pp == 0:
        validate(interleaved_one_f_one_b(pp, m, v))


# -- F3 / F4 / minor: bad schedule input ---------------------------------------------------------
@pytest.mark.parametrize("name, line, axis", [
    ("e26_sched_collective_cp_not_in_mesh", 28, "cp"),
    ("e27_accum_collective_axis_not_in_mesh", 43, "tp")])
def test_f3_collective_axis_not_in_mesh_names_the_plan_line(name, line, axis):
    """Was reported at proofs/cli.py:165 (E09, E26, E27)."""
    with pytest.raises(PlanError, match=rf"{name}\.py:{line}: buffer collective over axis "
                       rf"'{axis}', which is not in the mesh"):
        _prove(name)


@pytest.mark.parametrize("name, line", [("k09_b19_mb_collective_avg", 42),
                                        ("k10_b19_mb_collective_sum_early", 41)])
def test_f4_buffer_collective_over_mb_is_a_plan_error(name, line):
    """'mb' is the accumulation loop, not a process group. Was EQUIVALENT (K09, K10)."""
    with pytest.raises(PlanError, match=rf"{name}\.py:{line}: a buffer collective over 'mb'"):
        _prove(name)


@pytest.mark.parametrize("name, got", [("e18_schedule_none_events", "None"),
                                       ("e19_event_is_string", "'F0'")])
def test_minor_non_event_in_schedule_is_a_one_line_plan_error(name, got):
    """Was 'AttributeError: NoneType object has no attribute kind' (E18, E19)."""
    with pytest.raises(PlanError) as e:
        _prove(name)
    msg = str(e.value)
    assert "\n" not in msg
    assert f"{name}.py:29: stage 1 event 0 of schedule '1F1B (stage 1 edited)' is {got}, not a " \
           "schedule Event" in msg


def test_f1_each_stage_norm_of_its_own_gradients_summed_over_pp_is_proved():
    """per_stage(lambda s: global_grad_norm_sq(grads)) then AR_sum[pp]: on stage s, ``grads``
    holds only stage s's gradients, so this is torchtitan's fix (K03, refuted before)."""
    r = _prove("stage_norm_own_grads_per_stage")
    assert r.verdict == "EQUIVALENT", (r.verdict, [(g.name, g.reason) for g in r.open_goals])
