"""Adversarial round 38b (``tests/adversarial/ATTEMPTS.md``, "Round 38b"), against wip/r38 at
ac0f305 (round 38's fixes: ``backend_rejects.check_collectives``, ``value_reads.PICKLES`` /
``DEEP_READS`` / ``TEXTS``). Plans in ``plans/round38b/``. Truth:
``tests/adversarial/torch4_truth.py FILE 1`` (dp 2, gloo, float64).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND38B = Path(__file__).resolve().parent / "plans" / "round38b"


def _not_accepted(out: dict) -> bool:
    """Anything but EQUIVALENT (NOT EQUIVALENT, UNKNOWN or a refusal)."""
    return out["_rc"] != 0 and out.get("verdict") != "EQUIVALENT"


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND38B / name, tmp_path)


# -- sound outcomes (asserted) ------------------------------------------------------------------

@pytest.mark.slow
def test_r38b_01_all_to_all_single_noncontiguous_view_is_not_accepted(tmp_path):
    """UNKNOWN at ac0f305 (109 s): alltoall_base_ on a view of the gradient is not lowered."""
    out = _prove("r38b_01_dp_all_to_all_single_noncontiguous_caught_wrong.py", tmp_path)
    assert _not_accepted(out), out


# -- findings (strict xfail until fixed) --------------------------------------------------------

@pytest.mark.slow
def test_r38b_1_json_dumps_of_item_caught_is_not_accepted(tmp_path):
    """EQUIVALENT at ac0f305 (4 goals, 118 s); truth w1 0.0070, w2 0.0093. Fixed in round 38
    (``caught``: the TypeError caught is recorded)."""
    out = _prove("r38b_02_dp_json_dumps_of_item_caught_lr_wrong.py", tmp_path)
    assert _not_accepted(out), out
    assert out["_rc"] == 3, out


@pytest.mark.slow
def test_r38b_2_eval_str_of_grad_is_not_accepted(tmp_path):
    """EQUIVALENT at ac0f305 (4 goals, 109 s); truth w1 0.0070, w2 0.0093. Fixed in round 38
    (``value_reads._through``: code compiled from a string passes the text on)."""
    out = _prove("r38b_03_dp_eval_str_of_grad_lr_wrong.py", tmp_path)
    assert _not_accepted(out), out
    assert out["_rc"] == 3, out


@pytest.mark.slow
def test_r38b_3_all_to_all_list_shape_mismatch_is_not_accepted(tmp_path):
    """EQUIVALENT at ac0f305 (4 goals, 132 s); truth w1 0.0088, w2 0.018. Fixed in round 38
    (``backend_rejects``: lists like the inputs)."""
    out = _prove("r38b_04_dp_all_to_all_list_shape_mismatch_caught_wrong.py", tmp_path)
    assert _not_accepted(out), out
    assert out["_rc"] == 3, out


@pytest.mark.slow
def test_r38b_3_all_to_all_single_noncontiguous_is_not_accepted(tmp_path):
    """EQUIVALENT at ac0f305 (4 goals, 116 s); truth w1 0.0088, w2 0.018. Fixed in round 38
    (``backend_rejects``: contiguous)."""
    out = _prove("r38b_05_dp_all_to_all_single_fresh_noncontiguous_caught_wrong.py", tmp_path)
    assert _not_accepted(out), out
    assert out["_rc"] == 3, out


@pytest.mark.slow
def test_r38b_06_numpy_from_dlpack_uncaught_is_not_accepted(tmp_path):
    """exit 3 at ac0f305 (41 s): __dlpack__ of the fake gradient raises, uncaught."""
    out = _prove("r38b_06_dp_numpy_from_dlpack_grad_lr_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R38b-4: backend_rejects checks the traced step's graphs "
                   "only; a collective gloo rejects in parallelize (meta/fake tensors) passes")
def test_r38b_4_parallelize_band_float_caught_is_not_accepted(tmp_path):
    """EQUIVALENT at ac0f305 (4 goals, 70 s); truth w1 0.0088, w2 0.018."""
    out = _prove("r38b_07_dp_parallelize_band_float_caught_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r38b_3_all_to_all_single_own_split_mismatch_is_not_accepted(tmp_path):
    """EQUIVALENT at ac0f305 (4 goals, 66 s); truth w1 0.0088, w2 0.018. Fixed in round 38
    (``backend_rejects``: this rank's own split)."""
    out = _prove("r38b_11_dp_all_to_all_single_own_split_mismatch_caught_wrong.py", tmp_path)
    assert _not_accepted(out), out
    assert out["_rc"] == 3, out


@pytest.mark.slow
def test_r38b_10_repr_bound_at_import_is_not_accepted(tmp_path):
    """exit 3 at ac0f305 (27 s): the text is refused at line 50."""
    out = _prove("r38b_10_dp_repr_bound_at_import_lr_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r38b_09_send_noncontiguous_is_not_accepted(tmp_path):
    """UNKNOWN at ac0f305 (76 s): the send's peer is a rank literal (sound by accident)."""
    out = _prove("r38b_09_dp_send_noncontiguous_caught_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r38b_5_numpy_from_dlpack_caught_is_not_accepted(tmp_path):
    """EQUIVALENT at ac0f305 (4 goals, 101 s); truth w1 0.0070, w2 0.0093. Fixed in round 38
    (``caught``)."""
    out = _prove("r38b_14_dp_numpy_from_dlpack_caught_lr_wrong.py", tmp_path)
    assert _not_accepted(out), out
    assert out["_rc"] == 3, out


@pytest.mark.slow
def test_r38b_08_print_shapes_is_equivalent(tmp_path):
    """EQUIVALENT at ac0f305 (4 goals, 111 s); truth 5.6e-17 / 0 (right)."""
    out = _prove("r38b_08_dp_print_shapes_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
def test_r38b_1_decimal_of_item_caught_is_not_accepted(tmp_path):
    """EQUIVALENT at ac0f305 (4 goals, 111 s); truth w1 0.0070, w2 0.0093. Fixed in round 38
    (``caught``)."""
    out = _prove("r38b_12_dp_decimal_of_item_caught_lr_wrong.py", tmp_path)
    assert _not_accepted(out), out
    assert out["_rc"] == 3, out


@pytest.mark.slow
def test_r38b_2_numpy_array2string_of_grad_is_not_accepted(tmp_path):
    """EQUIVALENT at ac0f305 (4 goals, 83 s); truth w1 0.0070, w2 0.0093. Fixed in round 38
    (``value_reads._through``: numpy's frames pass the text on)."""
    out = _prove("r38b_13_dp_numpy_array2string_of_grad_lr_wrong.py", tmp_path)
    assert _not_accepted(out), out
    assert out["_rc"] == 3, out
