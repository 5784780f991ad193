"""Round 44c: break stop 44's backward-time FSDP2 model (``fsdp_backward``, ``Hold.pre_backward``)
and ``param_attrs``; ``tests/adversarial/ATTEMPTS.md``, "Round 44c". Plans in
``plans/round44c/``. Truth: ``tests/adversarial/torch4_truth.py FILE 2`` (dp 2, gloo, float64).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND44C = Path(__file__).resolve().parent / "plans" / "round44c"

pytestmark = pytest.mark.slow


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND44C / name, tmp_path)


def _not_accepted(out: dict) -> bool:
    return out["_rc"] in (1, 2, 3) and out.get("verdict") != "EQUIVALENT"


def test_r44c_1_group_second_member_input_not_wrapped(tmp_path):
    """``fully_shard([w1, w2])``: the late hook reads ``model.w2.weight is p2``. Truth wrong
    (w1 0.0070, w2 0.0093); EQUIVALENT at 19a67fb (4 goals, 39 s). Since stop 44 (inputs
    wrapped only when the state enters its forward pass): NOT EQUIVALENT (36 s)."""
    out = _prove("r44c_07_group_second_member_input_wrapped_identity_wrong.py", tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


def test_r44c_2_sharded_grad_read_in_late_backward_hook(tmp_path):
    """The late hook reads ``p2.grad is None`` (p2 the optimizer's w2). Truth wrong (w1 0.0070,
    w2 0.0093); EQUIVALENT at 19a67fb (4 goals, 40 s). Since stop 46 (``fsdp_grads``: the
    sharded ``.grad`` set at the group's post-backward, the root's in the final callback):
    NOT EQUIVALENT on grad:w2.weight (67 s)."""
    out = _prove("r44c_02_late_hook_reads_sharded_grad_during_backward_wrong.py", tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


def test_r44c_3_user_pre_hook_write_before_gather(tmp_path):
    """A forward pre-hook (build_model) halves ``w2.weight`` under no_grad. Truth wrong (w2 0.16
    / 0.24); EQUIVALENT at 19a67fb (4 goals, 41 s). Since stop 44 (the stand-in's pre-hook
    prepended, as FSDP2's): NOT EQUIVALENT (26 s)."""
    out = _prove("r44c_05_user_forward_pre_hook_from_build_model_write_wrong.py", tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


def test_r44c_3_user_post_hook_sees_views(tmp_path):
    """A forward hook registered in parallelize after fully_shard scales w2's output by 2 when
    ``isinstance(mod.weight, DTensor)`` (real: resharded, yes). Truth wrong (w1 0.016, w2
    0.015); EQUIVALENT at 19a67fb (4 goals, 13 s). Since stop 44 (the stand-in's post-hook
    placed where fully_shard registered FSDP2's, ``fsdp_backward.place_after``): NOT
    EQUIVALENT (37 s)."""
    out = _prove("r44c_15_user_forward_hook_after_fully_shard_sees_sharded_wrong.py", tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


def test_r44c_4_param_attr_reference_identity(tmp_path):
    """``w1.weight.twin`` is w2.weight (spec) / w1.weight (plan, DDP-style replicate). Truth
    wrong (w1 0.0070, w2 0.0093); EQUIVALENT at 19a67fb (4 goals, 38 s). Since stop 44 (an
    attribute holding a tensor refused, ``param_attrs.carried``): exit 3 (8 s)."""
    out = _prove("r44c_04_param_attr_twin_identity_wrong.py", tmp_path)
    assert out["_rc"] == 3 and "R44c-4" in out["_err"], out


def test_r44c_5_module_list_reference_identity(tmp_path):
    """``self.refs = [self.w2.weight]``; forward scales by 2 unless the registered one is it.
    FSDP2 replaces the parameter. Truth wrong (w1 0.016, w2 0.015); EQUIVALENT at 19a67fb
    (4 goals, 40 s). Since stop 45 (the step state refuses references to the parameters the
    traced step replaced): exit 3 naming the attribute (5 s)."""
    out = _prove("r44c_06_module_list_ref_to_build_model_param_identity_wrong.py", tmp_path)
    assert out["_rc"] == 3 and "module <model>.refs holds the parameter w2.weight" in \
        out["_err"], out


@pytest.mark.parametrize("name, entry", [
    ("r44c_18_global_ref_to_build_model_param_identity_wrong.py", "the global REFS of"),
    ("r44c_19_optimizer_over_held_param_refs_wrong.py", "module <model>.refs holds"),
])
def test_r44c_5_reference_routes(tmp_path, name, entry):
    """R44c-5 through a global of the train file set in ``build_model``, and through an
    optimizer built over such references (it updates the objects FSDP2 replaced): exit 3
    naming where the reference is held."""
    out = _prove(name, tmp_path)
    assert out["_rc"] == 3 and entry in out["_err"] and "R44c-5" in out["_err"], out


def test_r44c_8_idle_unit_recomputation_identity(tmp_path):
    """Inside the backward's recomputation ``model.w1.weight is not p1`` doubles silu's saved
    input. Truth wrong (w1 0.0018 / 0.0030); EQUIVALENT at 19a67fb (13 s) and ac24550. Since
    stop 45 (``Hold.after_forward`` keeps the views inside the backward, as FSDP2's
    ``post_forward`` skips its reshard when ``is_bw()``): NOT EQUIVALENT (14 s)."""
    out = _prove("r44c_16_nonreentrant_checkpoint_idle_unit_recompute_identity_wrong.py",
                 tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


def test_r44c_8_idle_unit_recomputation_right_control(tmp_path):
    """R44c-8's plan without the identity read (a checkpoint around a ``fully_shard`` unit
    that reshards after its forward): the recomputation keeps the unit's views registered,
    and the step is still EQUIVALENT."""
    out = _prove("r44c_17_nonreentrant_checkpoint_around_unit_right.py", tmp_path)
    assert out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT", out


def test_r44c_6_registered_grad_read_in_late_hook_needless_refutation(tmp_path):
    """R44c-6 (needless refutation): the late hook reads ``model.w2.weight.grad is None``; real
    and spec: set (truth right 2.8e-17). NOT EQUIVALENT at 19a67fb (41 s); pinned so a change
    shows (assert the current outcome is not EQUIVALENT-while-wrong: the plan is right).
    Since stop 47 refused, exit 3 (R47a-5: ``.grad`` of FSDP2's unsharded parameter read)."""
    out = _prove("r44c_10_late_hook_reads_registered_grad_right.py", tmp_path)
    assert out["_rc"] in (0, 1, 3), out


def test_r44c_7_user_post_hook_sees_sharded_is_equivalent(tmp_path):
    """R44c-7 (needless refutation, R44c-3's mirror): the hook scales by 2 unless the weight is
    a DTensor; real: it is (truth right 2.8e-17). NOT EQUIVALENT at 19a67fb (12 s); since stop
    44: EQUIVALENT (37 s)."""
    out = _prove("r44c_14_user_forward_hook_after_fully_shard_sees_sharded_right.py", tmp_path)
    assert out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT", out


def test_r44c_tp_drops_build_model_mark_refuted(tmp_path):
    """R44b-4 under TP (``parallelize_module`` makes new parameters): the truth script runs dp
    only; a 1-rank check shows the styles' parameter has no mark. NOT EQUIVALENT (12 s)."""
    out = _prove("r44c_13_tp_drops_build_model_param_mark_wrong.py", tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


def test_r44c_reentrant_checkpoint_unit_equivalent(tmp_path):
    """Reentrant checkpoint around a unit, late identity read: truth right 2.8e-17;
    EQUIVALENT (13 s)."""
    out = _prove("r44c_12_reentrant_checkpoint_unit_post_backward_identity_right.py", tmp_path)
    assert out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT", out


@pytest.mark.parametrize("name", [
    "r44c_01_user_forward_pre_hook_from_build_model_identity_wrong.py",
    "r44c_03_param_attr_twin_reference_write_wrong.py",
    "r44c_11_no_reshard_after_backward_identity_after_backward_wrong.py",
])
def test_r44c_wrong_plans_not_accepted(name, tmp_path):
    """Wrong plans: UNKNOWN (r44c_01, a global list changed) / exit 3 (r44c_03, FakeTensor
    AssertionError on a write to the pre-capture object; r44c_11, R43d-5 refusal) at 19a67fb."""
    assert _not_accepted(_prove(name, tmp_path))


def test_r44c_unshard_in_train_step_equivalent(tmp_path):
    """``model.unshard()`` inside train_step: truth right 2.8e-17; EQUIVALENT (41 s)."""
    out = _prove("r44c_08_unshard_in_train_step_right.py", tmp_path)
    assert out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT", out


def test_r44c_unused_tag_from_build_model_refused(tmp_path):
    """A mark set in build_model and never read: right (2.8e-17), refused by design (R44b-4)
    at 19a67fb (exit 3, 12 s): a needless refusal, pinned."""
    out = _prove("r44c_09_unused_param_tag_from_build_model_right.py", tmp_path)
    assert out["_rc"] in (0, 3), out
