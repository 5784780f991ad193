"""Adversarial round 41c (``tests/adversarial/ATTEMPTS.md``, "Round 41c"), against wip/sac41 at
970c0c9 (``registry_state``: ABC registries, abc's cache token and ``sys.modules`` entries no
import made as step state, R40b-2 / R40b-5; capture children ending with ``os._exit``;
``recompute.gathered_then_written``, R41a-1). Plans in ``plans/round41c/``. Truth:
``tests/adversarial/torch4_truth.py FILE 2`` (dp 2, gloo, float64, two steps).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND41C = Path(__file__).resolve().parent / "plans" / "round41c"


def _not_accepted(out: dict) -> bool:
    """Anything but EQUIVALENT (NOT EQUIVALENT, UNKNOWN or a refusal)."""
    return out["_rc"] != 0 and out.get("verdict") != "EQUIVALENT"


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND41C / name, tmp_path)


# -- findings (R41c-4 fixed at stop 41; the rest open: strict xfails) --------------------------


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R41c-1: a class with a lying __module__ put into a "
                   "module the step imports passes as that import's registration")
def test_r41c_1_lying_module_base_registered_is_not_accepted(tmp_path):
    """EQUIVALENT at 970c0c9 (4 goals, 39 s); truth step 2 w1 0.0027, w2 0.0051."""
    out = _prove("r41c_01_dp_lying_module_base_registered_via_step_import_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R41c-2: a hand-made module with a copied real spec in "
                   "sys.modules passes as an import")
def test_r41c_2_hand_made_module_copied_spec_is_not_accepted(tmp_path):
    """EQUIVALENT at 970c0c9 (4 goals, 27 s); truth step 2 w1 0.0027, w2 0.0051."""
    out = _prove("r41c_02_dp_hand_made_module_copied_spec_carries_scale_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R41c-3: a sys.modules entry replaced by a fresh copy "
                   "of the same module reads alike (identity not compared)")
def test_r41c_3_sys_modules_entry_replaced_is_not_accepted(tmp_path):
    """EQUIVALENT at 970c0c9 (4 goals, 23 s); truth step 2 w1 0.0027, w2 0.0051."""
    out = _prove("r41c_09_dp_sys_modules_entry_replaced_module_torch_does_not_name_wrong.py",
                 tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r41c_4_fsdp_sac_write_through_data_is_not_accepted(tmp_path):
    """EQUIVALENT at 970c0c9 (4 goals, 25 s); truth step 1 w1 0.0018, w2 0.013. Fixed (stop 41:
    a SAC policy saving an aliasing operator under fully_shard is refused,
    recompute.saved_alias_refused): exit 3 (14 s)."""
    out = _prove("r41c_05_fsdp_sac_weight_written_through_data_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r41c_4_fsdp_sac_write_through_local_shard_is_not_accepted(tmp_path):
    """EQUIVALENT at 970c0c9 (4 goals, 26 s); truth step 1 w1 0.0018, w2 0.013. Fixed (stop 41:
    gathered_then_written reads the local tensor's version too): exit 3 (16 s)."""
    out = _prove("r41c_07_fsdp_sac_weight_written_through_local_shard_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R41c-5: a functools.singledispatch global is "
                   "unreadable (opaque classmethod_descriptor): UNKNOWN")
def test_r41c_5_singledispatch_helper_is_equivalent(tmp_path):
    """UNKNOWN at 970c0c9 (32 s); truth 5.6e-17 / 0, 5.6e-17 / 5.6e-17 (right)."""
    out = _prove("r41c_04_dp_singledispatch_helper_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R41c-6: a .data write between forward and backward "
                   "under FSDP2: the capture's gather holds the forward's value, the real "
                   "re-gather the new one: a right plan refuted")
def test_r41c_6_fsdp_write_through_data_right_is_equivalent(tmp_path):
    """NOT EQUIVALENT at 970c0c9 (2 refuted, 58 s); truth 6.9e-18 / 1.4e-17 (right)."""
    out = _prove("r41c_12_fsdp_weight_written_through_data_before_backward_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R11-4's family: a real import during the step is the "
                   "state the next step reads ('graphlib' in sys.modules)")
def test_r11_4_real_import_in_step_is_not_accepted(tmp_path):
    """EQUIVALENT at 970c0c9 (4 goals, 43 s); truth step 2 w1 0.0027, w2 0.0051."""
    out = _prove("r41c_08_dp_real_import_in_step_is_the_carrier_wrong.py", tmp_path)
    assert _not_accepted(out), out


# -- sound outcomes -------------------------------------------------------------------------------


@pytest.mark.slow
def test_r41c_sys_modules_json_replaced_is_not_accepted(tmp_path):
    """UNKNOWN at 970c0c9 (35 s; torch._dynamo.exc names json); truth step 2 0.0027 / 0.0051."""
    out = _prove("r41c_03_dp_sys_modules_entry_replaced_by_fresh_copy_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r41c_sys_modules_entry_deleted_is_not_accepted(tmp_path):
    """UNKNOWN at 970c0c9 (41 s); truth step 2 0.0027 / 0.0051."""
    out = _prove("r41c_06_dp_sys_modules_entry_deleted_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r41c_stdlib_abc_nested_global_is_not_accepted(tmp_path):
    """UNKNOWN at 970c0c9 (27 s, the global unreadable); truth step 2 0.0027 / 0.0051."""
    out = _prove("r41c_10_dp_stdlib_abc_nested_in_class_registered_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r41c_stdlib_abc_nested_by_sys_modules_is_not_accepted(tmp_path):
    """UNKNOWN at 970c0c9 (55 s, abc's cache token); truth step 2 0.0027 / 0.0051."""
    out = _prove("r41c_11_dp_stdlib_abc_nested_in_class_reached_by_sys_modules_wrong.py",
                 tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R41c-7: abc's cache token move paid for by a "
                   "lying-__module__ ABC's pre-step registration; a nested stdlib ABC's "
                   "registry is read by nothing")
def test_r41c_7_abc_token_move_paid_is_not_accepted(tmp_path):
    """EQUIVALENT at 970c0c9 (4 goals, 70 s); truth step 2 w1 0.0027, w2 0.0051."""
    out = _prove("r41c_16_dp_abc_token_move_paid_by_lying_module_abc_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r41c_user_abc_in_list_is_not_accepted(tmp_path):
    """UNKNOWN at 970c0c9 (78 s); truth step 2 0.0027 / 0.0051."""
    out = _prove("r41c_13_dp_user_abc_held_in_list_registered_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R41c-3: importlib.reload replaces a module's objects "
                   "by new ones that read alike (identity not compared)")
def test_r41c_3_importlib_reload_is_not_accepted(tmp_path):
    """EQUIVALENT at 970c0c9 (4 goals, 65 s); truth step 2 w1 0.0027, w2 0.0051."""
    out = _prove("r41c_14_dp_importlib_reload_identity_carrier_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R41c-8: a non-module object in sys.modules before the "
                   "step is read by its type and identity only; its attributes are not")
def test_r41c_8_non_module_in_sys_modules_is_not_accepted(tmp_path):
    """EQUIVALENT at 970c0c9 (4 goals, 88 s); truth step 2 w1 0.0027, w2 0.0051."""
    out = _prove("r41c_15_dp_non_module_in_sys_modules_attribute_written_wrong.py", tmp_path)
    assert _not_accepted(out), out
