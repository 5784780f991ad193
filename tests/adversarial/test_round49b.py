"""Round 49b: stop 49's freed-memory model of FSDP2's unsharded parameter (``fsdp_freed``)
beyond round 49a (the FSDP-based ``replicate``, a second forward after ``optimizer.step()``,
``.data`` / ``detach()`` of a kept reference, a saved-for-backward unsharded parameter) and
the ``pp_leaves`` refactor (e9eb3a2: a ``fully_shard`` pipeline stage's leaf uses
``fsdp_unsharded.gathered`` / ``reduced``), against b6164b6 (``tests/adversarial/ATTEMPTS.md``,
"Round 49b"). Plans in ``plans/round49b/``. Truth: ``torch4_truth.py FILE 2``;
pipelines (pp 2 x dp 2): ``tests/torch_frontend/pp_truth.py FILE``.

Findings: R49b-1 (a kept reference to a ``fully_shard`` pipeline stage's unsharded parameter
is freed after ``schedule.step`` for real, allocated in the stand-in: a size branch is a false
accept; the module states pipeline stages are not covered), R49b-2 (a read of it there: real
ranks die with SIGSEGV, EQUIVALENT) -- see ATTEMPTS.md for the measured verdicts.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND49B = Path(__file__).resolve().parent / "plans" / "round49b"

pytestmark = pytest.mark.slow


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND49B / name, tmp_path)


def _not_accepted(out: dict) -> bool:
    return out["_rc"] != 0 and out.get("verdict") != "EQUIVALENT"


# -- findings (fixed in stop 49) ---------------------------------------------------------------

def test_r49b_1_pp_kept_reference_size_after_step_is_not_accepted(tmp_path):
    """R49b-1: EQUIVALENT at b6164b6 (103 s); truth wrong (grad max 0.066, tok_embeddings
    0.0051, update 1.1e-5). Since the fix (``pp_leaves.StepLeaves.reduce`` frees the step
    leaves' memory, ``fsdp_freed``): not EQUIVALENT."""
    out = _prove("r49b_07_pp_kept_ref_freed_after_step_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.parametrize("name", [
    "r49b_13_pp_kept_ref_read_times_zero_crash.py",
    "r49b_08_pp_kept_ref_read_after_step_wrong.py",
])
def test_r49b_2_pp_kept_reference_read_after_step_is_refused(name, tmp_path):
    """R49b-2: r49b_13 EQUIVALENT at b6164b6 (107 goals, 82 s); truth: all 4 ranks die
    (SIGSEGV). r49b_08 (the same read times 0.01) was NOT EQUIVALENT only through the added
    value. Since the fix: the read of freed memory is refused (exit 3, R48a-2, 10 s)."""
    out = _prove(name, tmp_path)
    assert out["_rc"] == 3 and "R48a-2" in out["_err"], out


# -- sound / complete -------------------------------------------------------------------------

@pytest.mark.parametrize("name", [
    "r49b_01_replicate_live_after_forward_wrong.py",
    "r49b_02_replicate_freed_after_backward_wrong.py",
    "r49b_04_second_forward_root_freed_between_wrong.py",
    "r49b_09_pp_divide_factor_one_wrong.py",
])
def test_r49b_wrong_plan_refuted(name, tmp_path):
    """Round 49b: replicate never reshards after forward, reshards after backward; the root
    frees between optimizer.step and a second forward; PP x FSDP divide factor 1 (refactor
    regression): truth wrong; NOT EQUIVALENT at b6164b6."""
    out = _prove(name, tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


@pytest.mark.parametrize("name", [
    "r49b_03_replicate_detach_read_after_backward_wrong.py",
    "r49b_05_second_forward_data_read_between_wrong.py",
    "r49b_10_saved_weight_backward_order.py",
])
def test_r49b_freed_read_refused(name, tmp_path):
    """Round 49b: a read of freed memory (detach / .data of a kept reference, a saved-for-
    backward unsharded w2 whose backward node runs after w2's post-forward reshard): real ranks
    die; exit 3 at b6164b6 (10-17 s)."""
    out = _prove(name, tmp_path)
    assert out["_rc"] == 3, out


@pytest.mark.parametrize("name", [
    "r49b_06_second_forward_clone_read_between_right.py",
    "r49b_11_replicate_data_read_between_fwd_bwd_right.py",
    "r49b_12_no_reshard_after_forward_data_read_right.py",
    "r49b_14_reshard_after_backward_false_data_read_right.py",
])
def test_r49b_right_plan_proved(name, tmp_path):
    """Round 49b: right plans reading memory that is allocated for real (or a clone):
    EQUIVALENT at b6164b6."""
    out = _prove(name, tmp_path)
    assert out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT", out
