"""Round 49c: the freed memory of a ``fully_shard`` pipeline stage's leaves (66d9a93:
``pp_leaves.StepLeaves.reduce`` frees the step leaves after the reduction, R49b-1 / -2) --
inside ``schedule.step`` (FSDP2's reshard after each block's forward is not modelled), two
``schedule.step`` calls in one step (``tests/adversarial/ATTEMPTS.md``, "Round 49c").
Plans in ``plans/round49c/``. Truth: ``tests/torch_frontend/pp_truth.py FILE`` (pp 2 x dp 2).

Findings: R49c-1 (the last stage's ``loss_fn`` branches on the size of a kept block
reference: freed for real after the block's forward, EQUIVALENT), R49c-2 (a block's forward
hook branches on the previous block's kept reference, EQUIVALENT), R49c-3 (a read of it in
``loss_fn``: the real last-stage ranks die with SIGSEGV). All three fixed in stop 49
(``pp_leaves.StepLeaves.reshard``: a block's leaves freed at its post-forward).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND49C = Path(__file__).resolve().parent / "plans" / "round49c"

pytestmark = pytest.mark.slow


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND49C / name, tmp_path)


def _not_accepted(out: dict) -> bool:
    return out["_rc"] != 0 and out.get("verdict") != "EQUIVALENT"


# -- open findings (false accepts) ------------------------------------------------------------

def test_r49c_1_pp_loss_fn_kept_reference_size_is_not_accepted(tmp_path):
    """R49c-1: EQUIVALENT at 66d9a93 (107 goals, 131 s); truth wrong (grad max 0.066). Since
    the fix (``pp_leaves.StepLeaves.reshard`` at a block's post-forward): NOT EQUIVALENT
    (118 s)."""
    out = _prove("r49c_01_pp_lossfn_kept_ref_freed_wrong.py", tmp_path)
    assert _not_accepted(out), out


def test_r49c_2_pp_previous_block_reference_size_is_not_accepted(tmp_path):
    """R49c-2: EQUIVALENT at 66d9a93 (197 goals, 143 s); truth wrong (grad max 0.011). Since
    the fix: not EQUIVALENT."""
    out = _prove("r49c_04_pp_other_block_ref_freed_in_forward_wrong.py", tmp_path)
    assert _not_accepted(out), out


def test_r49c_3_pp_loss_fn_kept_reference_read_is_refused(tmp_path):
    """R49c-3: EQUIVALENT at 66d9a93 (107 goals, 117 s); ``0.0 * sum()`` of the kept block
    reference in the last stage's loss_fn; truth: ranks 2, 3 die (SIGSEGV), 0, 1 exit 1.
    Since the fix: the read is refused (exit 3 at line 60, R48a-2; 87 s)."""
    out = _prove("r49c_02_pp_lossfn_kept_ref_read_crash.py", tmp_path)
    assert out["_rc"] == 3 and "R48a-2" in out["_err"] and \
        "r49c_02_pp_lossfn_kept_ref_read_crash.py:60:" in out["_err"], out


# -- sound ------------------------------------------------------------------------------------

def test_r49c_two_steps_step1_reference_branch_is_not_accepted(tmp_path):
    """r49c_05: NOT EQUIVALENT at 66d9a93 (82 refuted, 138 s); truth wrong (grad 0.038; two
    schedule.steps are wrong by themselves: the second scale_grads divides step 1 again)."""
    out = _prove("r49c_05_pp_two_steps_step1_ref_alloc_wrong.py", tmp_path)
    assert _not_accepted(out), out
