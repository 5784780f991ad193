"""Adversarial round 39c (``tests/adversarial/ATTEMPTS.md``, "Round 39c"), against main at
0a0faea (``wrapper_names.check_names_kept``; ``step_state._dynamo_cache`` reading the
DisableContext's callback; ``GenericAlias`` by exact type: 5fc3630). Plans in
``plans/round39c/``. Truth: ``tests/adversarial/torch4_truth.py FILE 1`` (dp 2, gloo,
float64; ``FILE 2`` for the plans wrong from step 2).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND39C = Path(__file__).resolve().parent / "plans" / "round39c"


def _not_accepted(out: dict) -> bool:
    """Anything but EQUIVALENT (NOT EQUIVALENT, UNKNOWN or a refusal)."""
    return out["_rc"] != 0 and out.get("verdict") != "EQUIVALENT"


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND39C / name, tmp_path)


# -- findings (R39c-1 refused since stop 44, ``parallelize_guard``; R39c-2 fixed at stop 39) -----


@pytest.mark.slow
def test_r39c_1_copy_data_between_params_is_refused(tmp_path):
    """EQUIVALENT at 0a0faea (42 s); truth a.weight 0.64, b.weight 0.017. Since stop 44
    (``parallelize_guard``): exit 3 (6 s)."""
    out = _prove("r39c_01_dp_copy_data_between_params_wrong.py", tmp_path)
    assert out["_rc"] == 3, out


@pytest.mark.slow
def test_r39c_1_new_params_swapped_values_is_refused(tmp_path):
    """EQUIVALENT at 0a0faea (35 s); truth a.weight 0.63, b.weight 0.63. Since stop 44
    (``parallelize_guard``): exit 3 (7 s)."""
    out = _prove("r39c_02_dp_new_params_swapped_values_wrong.py", tmp_path)
    assert out["_rc"] == 3, out


@pytest.mark.slow
def test_r39c_1_load_permuted_state_dict_is_refused(tmp_path):
    """EQUIVALENT at 0a0faea (39 s); truth a.weight 0.63, b.weight 0.63. Since stop 44
    (``parallelize_guard``): exit 3 (5 s)."""
    out = _prove("r39c_03_dp_load_permuted_state_dict_wrong.py", tmp_path)
    assert out["_rc"] == 3, out


@pytest.mark.slow
def test_r39c_1_new_modules_swapped_params_is_refused(tmp_path):
    """EQUIVALENT at 0a0faea (4 goals, 48 s); truth a.weight 0.63, b.weight 0.63. Since stop 44
    (``parallelize_guard``): exit 3 (7 s)."""
    out = _prove("r39c_04_dp_new_modules_swapped_params_wrong.py", tmp_path)
    assert out["_rc"] == 3, out


@pytest.mark.slow
def test_r39c_2_generic_alias_unpacked_flag_is_not_accepted(tmp_path):
    """EQUIVALENT at 0a0faea (4 goals, 57 s); truth step 1 0 / 0, step 2 0.0033 / 0.0024.
    Fixed (stop 39: the alias's text says ``*`` when unpacked): UNKNOWN (56 s)."""
    out = _prove("r39c_07_dp_generic_alias_unpacked_flag_wrong.py", tmp_path)
    assert _not_accepted(out), out


# -- sound at 0a0faea (asserted) -----------------------------------------------------------------


@pytest.mark.slow
def test_r39c_parametrize_is_refused(tmp_path):
    """exit 3 at 0a0faea (15 s, "parallelize moved 'a.weight' ... to
    'a.parametrizations.weight.original'"); wrong by construction (forward uses -W)."""
    out = _prove("r39c_05_dp_parametrize_neg_wrong.py", tmp_path)
    assert out["_rc"] == 3, out


@pytest.mark.slow
def test_r39c_tied_parameter_is_refused(tmp_path):
    """exit 3 at 0a0faea (17 s, "parallelize moved 'a.weight' ... to 'b.weight'"); truth
    a.weight 0.013, b.weight 0.63."""
    out = _prove("r39c_06_dp_tie_params_wrong.py", tmp_path)
    assert out["_rc"] == 3, out


@pytest.mark.slow
def test_r39c_1_swap_tensors_is_refused(tmp_path):
    """EQUIVALENT at 0a0faea (4 goals, 62 s); truth a.weight 0.63, b.weight 0.63. Since stop 44
    (``parallelize_guard``): exit 3 (10 s)."""
    out = _prove("r39c_09_dp_swap_tensors_wrong.py", tmp_path)
    assert out["_rc"] == 3, out


@pytest.mark.slow
def test_r39c_callback_from_stance_patched_is_not_accepted(tmp_path):
    """UNKNOWN at 0a0faea (48 s, step-state: torch namespace torch._dynamo.eval_frame);
    truth step 2 0.011 / 0.014."""
    out = _prove("r39c_08_dp_dynamo_callback_from_stance_patched_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r39c_modulelist_reversed_is_refused(tmp_path):
    """exit 3 at 0a0faea (21 s, "parallelize moved ..."); truth 0.63 / 0.63."""
    out = _prove("r39c_10_dp_modulelist_reversed_wrong.py", tmp_path)
    assert out["_rc"] == 3, out


@pytest.mark.slow
def test_r39c_disablecontext_callback_property_is_not_accepted(tmp_path):
    """UNKNOWN at 0a0faea (42 s, step-state: torch namespace torch._dynamo.eval_frame);
    truth step 2 0.011 / 0.014."""
    out = _prove("r39c_11_dp_dynamo_disablecontext_callback_property_wrong.py", tmp_path)
    assert _not_accepted(out), out
