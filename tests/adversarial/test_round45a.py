"""Round 45a: break stop 45's two fixes (R44c-8: FSDP2's post-forward keeps the views inside the
backward; R44c-5: step state refuses references to the replaced parameters), against f09983a
(``tests/adversarial/ATTEMPTS.md``, "Round 45a"). Plans in ``plans/round45a/``. Truth:
``tests/adversarial/torch4_truth.py FILE 2`` (dp 2, gloo, float64, two steps).

At f09983a every plan with a ``fully_shard`` unit is refused (R45a-1: the stand-in's own map of
the pre-capture parameters, closed over by its hooks, counts as a held reference); fixed at
f5782c2 (that map is shardproof's own). R45a-2/-3/-4 are fixed in stop 45 too.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND45A = Path(__file__).resolve().parent / "plans" / "round45a"
ROUND44C = Path(__file__).resolve().parent / "plans" / "round44c"

pytestmark = pytest.mark.slow


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(path: Path, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(path, tmp_path)


@pytest.mark.parametrize("path", [
    ROUND44C / "r44c_08_unshard_in_train_step_right.py",
    ROUND45A / "r45a_02_control_no_checkpoint_right.py",
    ROUND45A / "r45a_15_torchtitan_checkpoint_wrapper_blocks_right.py",
])
def test_r45a_1_plain_fsdp2_plans_are_not_refused(path, tmp_path):
    """R45a-1: exit 3 at f09983a (9-14 s: 'module <model>._forward_hooks holds the parameter
    w1.weight object the model had before the step'); truth right (<= 5.6e-17). With the
    stand-in's ``orig`` map among shardproof's objects: EQUIVALENT (31-32 s)."""
    out = _prove(path, tmp_path)
    assert _equivalent(out), out


def test_r45a_1_r44c_8_still_refuted(tmp_path):
    """R44c-8 (truth wrong w1 0.0018): NOT EQUIVALENT behind the R45a-1 fix (28 s)."""
    out = _prove(ROUND44C / "r44c_16_nonreentrant_checkpoint_idle_unit_recompute_identity_wrong.py",
                 tmp_path)
    assert out["_rc"] == 1, out


@pytest.mark.parametrize("name", [
    "r45a_01_recompute_after_post_backward_stays_unsharded_wrong.py",
    "r45a_13_custom_function_backward_runs_unit_after_post_backward_wrong.py",
])
def test_r45a_2_unit_rerun_after_post_backward_is_not_accepted(name, tmp_path):
    """R45a-2: EQUIVALENT (29 s) behind the R45a-1 fix; truth wrong (w1 0.0054 / 0.0105).
    Since the stand-in models the state's PRE_BACKWARD (unshard only, no reshard after, the
    final callback skips a unit whose post-backward ran: ``fsdp_hold.unshard_only``, which
    holds the views it registers): exit 3 (5-6 s), as FSDP2 keeps the stale unsharded
    parameters registered into the next step, which one traced step cannot show."""
    out = _prove(ROUND45A / name, tmp_path)
    assert out["_rc"] == 3 and "registered after the step" in out["_err"], out


def test_r45a_3_stale_unsharded_next_step_is_refused(tmp_path):
    """r45a_03 (r45a_01 without the identity read; truth with ``--read-last`` wrong 0.0054 /
    2.2e-5): UNKNOWN at f8061a3 (the hooks' step state), EQUIVALENT once that state was reset
    at the step's end (8a8569f..eeb6ae0: ``pre`` read the last unit's ``cur`` by late
    binding, so ``unshard_only`` held no view); exit 3 since (6 s)."""
    out = _prove(ROUND45A / "r45a_03_recompute_after_post_backward_stale_next_step_wrong.py",
                 tmp_path)
    assert out["_rc"] == 3 and "registered after the step" in out["_err"], out


@pytest.mark.parametrize("name, where", [
    ("r45a_05_ref_in_math_module_global_identity_wrong.py", "the globals of the module math"),
    ("r45a_06_ref_in_builtins_identity_wrong.py", "reachable from builtins"),
    ("r45a_08_view_base_identity_wrong.py", "module <model>.v holds the parameter w2.weight "
                                            "(a view)"),
    ("r45a_12_sys_modules_entry_identity_wrong.py", "the globals of the module refs45a"),
])
def test_r45a_3_hidden_reference_is_refused(name, where, tmp_path):
    """R45a-3: EQUIVALENT (23-59 s) behind the R45a-1 fix; truth wrong (w1 0.0158, w2 0.0153).
    Since ``stale_refs.refuse_held`` (holders searched upwards with the collector) and the
    step state's view check: exit 3 naming where the reference is held (11-14 s)."""
    out = _prove(ROUND45A / name, tmp_path)
    assert out["_rc"] == 3 and where in out["_err"], out


@pytest.mark.parametrize("name", [
    "r45a_07_id_int_identity_wrong.py",
    "r45a_09_lru_cache_identity_wrong.py",
    "r45a_10_generator_frame_identity_wrong.py",
    "r45a_11_weakvaluedict_identity_wrong.py",
    "r45a_16_param_data_from_build_model_value_read_wrong.py",
])
def test_r45a_hidden_reference_sound(name, tmp_path):
    """UNKNOWN (07, 09, 10: 28-48 s) or exit 3 (11: 11 s; 16: 13 s, FakeTensor AssertionError)
    behind the R45a-1 fix; truth wrong (w1 0.0158; 16: step 2 2.2e-5)."""
    out = _prove(ROUND45A / name, tmp_path)
    assert not _equivalent(out), out


def test_r45a_4_reentrant_checkpoint_late_identity_right(tmp_path):
    """R45a-4: r44c_12 (truth right 2.8e-17) EQUIVALENT at 19a67fb, NOT EQUIVALENT (14 s, 4
    goals refuted) behind the R45a-1 fix at f09983a. Since the recomputation registers
    FSDP2's post- and pre-backward as torch does (the inner backward reshards the unit):
    EQUIVALENT (40 s)."""
    out = _prove(ROUND44C / "r44c_12_reentrant_checkpoint_unit_post_backward_identity_right.py",
                 tmp_path)
    assert _equivalent(out), out


def test_r45a_15_mutant_sum_loss_is_refuted(tmp_path):
    """r45a_15 (torchtitan style: checkpoint_wrapper blocks, fully_shard per block and root)
    is UNKNOWN at 95d291d and f8061a3 (the gradient of a square residual layer named one dim
    twice); since the activations' backward rules name their output as the forward value
    (``rules_elementwise._dims_forward_first``) it is EQUIVALENT (50 s, above). Its mutant with
    the loss summed (FSDP2 averages over dp; truth wrong 6.7e-8 under AdamW) is refuted."""
    out = _prove(ROUND45A / "r45a_17_torchtitan_checkpoint_wrapper_blocks_sum_loss_wrong.py",
                 tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out
