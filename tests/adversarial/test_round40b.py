"""Adversarial round 40b (``tests/adversarial/ATTEMPTS.md``, "Round 40b"), against main at
1510d44 (R39a-5: torch's checkpoint wrapper's own ``training`` flag read by ``step_state``,
left out of ``leftover.scalar_state``; R39a-6: an abstract model class read through its
``_abc_impl`` registry). Plans in ``plans/round40b/``. Truth:
``tests/adversarial/torch4_truth.py FILE 2`` (dp 2, gloo, float64, 2 steps).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND40B = Path(__file__).resolve().parent / "plans" / "round40b"


def _not_accepted(out: dict) -> bool:
    """Anything but EQUIVALENT (NOT EQUIVALENT, UNKNOWN or a refusal)."""
    return out["_rc"] != 0 and out.get("verdict") != "EQUIVALENT"


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND40B / name, tmp_path)


# -- findings (R40b-1, 3, 4 fixed at stop 40; R40b-2, 5 at stop 41) ----------------------------


@pytest.mark.slow
def test_r40b_1_root_wrapper_block_flag_cleared_is_not_accepted(tmp_path):
    """EQUIVALENT at 1510d44 (4 goals, 33 s); truth step 2 0.011 / 0.014.
    Fixed (stop 40: the root wrapper's block is named ``<model>``): UNKNOWN."""
    out = _prove("r40b_01_dp_root_wrapper_block_flag_cleared_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r40b_2_stdlib_abc_register_in_step_is_not_accepted(tmp_path):
    """EQUIVALENT at 1510d44 (4 goals, 34 s); truth step 2 0.0027 / 0.0051.
    Fixed (stop 41: every module-level ABC's registry and abc's cache token are read,
    ``registry_state``): UNKNOWN."""
    out = _prove("r40b_02_dp_stdlib_abc_register_in_step_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r40b_3_abc_negative_cache_invalidated_is_not_accepted(tmp_path):
    """EQUIVALENT at 1510d44 (6 goals, 19 s); truth step 2 0.0027 / 0.0051.
    Fixed (stop 40: a user ABC with a ``__subclasshook__`` of the user's is read with its
    caches): UNKNOWN."""
    out = _prove("r40b_05_dp_abc_negative_cache_invalidated_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r40b_4_abc_subclass_kept_in_sys_modules_is_not_accepted(tmp_path):
    """EQUIVALENT at 1510d44 (4 goals, 23 s); truth step 2 0.0027 / 0.0051.
    Fixed (stop 40: a user ABC's subclasses and their registries are read): UNKNOWN."""
    out = _prove("r40b_08_dp_abc_subclass_kept_in_sys_modules_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r40b_4_abc_subclass_kept_on_stdlib_class_is_not_accepted(tmp_path):
    """EQUIVALENT at 1510d44 (4 goals, 31 s); truth step 2 0.0027 / 0.0051.
    Fixed (stop 40: a user ABC's subclasses and their registries are read): UNKNOWN."""
    out = _prove("r40b_10_dp_abc_subclass_kept_on_stdlib_class_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r40b_5_value_carried_in_new_sys_modules_entry_is_not_accepted(tmp_path):
    """EQUIVALENT at 1510d44 (4 goals, 35 s); truth step 2 0.0027 / 0.0051.
    Fixed (stop 41: a ``sys.modules`` entry no import made is a change, ``registry_state``):
    UNKNOWN."""
    out = _prove("r40b_09_dp_value_carried_in_new_sys_modules_entry_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r40b_3_abc_caches_cleared_in_step_is_not_accepted(tmp_path):
    """EQUIVALENT at 1510d44 (6 goals, 62 s); truth step 2 0.0027 / 0.0051.
    Fixed (stop 40: a user ABC with a ``__subclasshook__`` of the user's is read with its
    caches): UNKNOWN."""
    out = _prove("r40b_12_dp_abc_caches_cleared_in_step_wrong.py", tmp_path)
    assert _not_accepted(out), out


# -- sound outcomes: asserted ---------------------------------------------------------------------


@pytest.mark.slow
def test_r40b_abc_subclasshook_on_process_group_is_not_accepted(tmp_path):
    """NOT EQUIVALENT at 1510d44 (23 s); truth step 1 0.0039 / 0.0048 (wrong)."""
    out = _prove("r40b_03_dp_abc_subclasshook_cache_across_traces_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r40b_abc_answer_cached_at_build_is_not_accepted(tmp_path):
    """NOT EQUIVALENT at 1510d44 (19 s); truth step 1 0.0039 / 0.0048 (wrong)."""
    out = _prove("r40b_04_dp_abc_answer_cached_at_build_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r40b_abc_subclass_kept_on_class_is_not_accepted(tmp_path):
    """UNKNOWN at 1510d44 (30 s, step-state "changes the global Cfg"); truth step 2 0.0027."""
    out = _prove("r40b_07_dp_abc_subclass_registry_in_step_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r40b_typing_protocol_model_base_is_equivalent(tmp_path):
    """EQUIVALENT at 1510d44 (10 goals, 32 s); truth 2.8e-17 / 6.9e-18 (right)."""
    out = _prove("r40b_06_dp_typing_protocol_model_base_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
def test_r40b_ac_eval_block_wrapper_flag_read_is_not_accepted(tmp_path):
    """NOT EQUIVALENT at 1510d44 (32 s); truth step 1 0.016 / 0.015 (wrong)."""
    out = _prove("r40b_11_dp_ac_eval_block_wrapper_flag_read_wrong.py", tmp_path)
    assert _not_accepted(out), out
