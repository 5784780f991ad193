"""Round 49d: a ``fully_shard`` pipeline block's step leaves freed at its post-forward (509cf78:
``pp_leaves.StepLeaves.reshard``, the fix of R49c-1 / -2 / -3) -- the order of FSDP2's
pre-backward hook and the user's tensor hooks on a block's output, activation checkpointing
(reentrant and non-reentrant) under ``Schedule1F1B``, ``reshard_after_forward=False``
(``tests/adversarial/ATTEMPTS.md``, "Round 49d"). Plans in ``plans/round49d/``. Truth:
``tests/torch_frontend/pp_truth.py FILE`` (pp 2 x dp 2).

No false accept found (see ATTEMPTS.md for every attempt and its measured verdict).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND49D = Path(__file__).resolve().parent / "plans" / "round49d"

pytestmark = pytest.mark.slow


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND49D / name, tmp_path)


def _not_accepted(out: dict) -> bool:
    return out["_rc"] != 0 and out.get("verdict") != "EQUIVALENT"


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


# -- wrong / crashing plans -------------------------------------------------------------------

def test_r49d_block_output_hook_before_fsdp_freed_is_not_accepted(tmp_path):
    """r49d_01: a tensor hook on the block's (new) output, registered before FSDP2's
    pre-backward hook, doubles the gradient when the kept w2 weight is freed (it is, for real).
    Truth wrong (grad max 0.031); NOT EQUIVALENT at 509cf78 (75 refuted of 107, 215 s)."""
    out = _prove("r49d_01_pp_block_output_hook_before_fsdp_freed_wrong.py", tmp_path)
    assert _not_accepted(out), out


def test_r49d_block_output_new_tensor_hook_read_is_not_accepted(tmp_path):
    """r49d_02: a forward hook registered after ``fully_shard`` returns ``o * 1.0`` and hooks
    the new tensor, reading the kept w2 weight: that hook runs before FSDP2's pre-backward
    hook (on ``o``), over freed memory. Truth: ranks 2, 3 SIGSEGV, 0, 1 exit 1.
    At 509cf78: exit 3 (14 s): the ``aten.sum`` in the tensor hook refused, "reads FSDP2's
    unsharded parameter of layers.0.feed_forward.w2.weight ... after its unit resharded"
    (line 58, R48a-2)."""
    out = _prove("r49d_02_pp_block_output_hook_after_fsdp_new_tensor_read_crash.py", tmp_path)
    assert _not_accepted(out), out


# -- right plans: the read of an all-gathered kept reference must not be refused ---------------

def test_r49d_same_tensor_hook_after_fsdp_read_is_not_refused(tmp_path):
    """r49d_04: a tensor hook on the block's output itself, registered after FSDP2's
    pre-backward hook, reads the kept w2 weight (allocated for real). Truth right (4e-17).
    At 509cf78: UNKNOWN (86 rewriting + 21 reused, 0 open goals, 179 s) only from step-state
    (the plan's hook ``keep`` lists); not refused."""
    out = _prove("r49d_04_pp_block_output_same_tensor_hook_after_fsdp_read_right.py", tmp_path)
    assert out["_rc"] in (0, 2) and out.get("verdict") != "NOT EQUIVALENT", out


def test_r49d_nonreentrant_ac_1f1b_kept_reference_read_is_not_refused(tmp_path):
    """r49d_06: non-reentrant ``checkpoint_wrapper`` blocks, ``Schedule1F1B``; the w2 hook of
    micro-batch 1 and of the recomputations reads micro-batch 0's kept weight (allocated).
    Truth right (4e-17). At 509cf78: UNKNOWN (86 rewriting + 21 reused, 0 open, 154 s) only
    from step-state (the hook's ``keep`` default list); not refused."""
    out = _prove("r49d_06_pp_nonreentrant_ac_1f1b_kept_ref_read_right.py", tmp_path)
    assert out["_rc"] in (0, 2) and out.get("verdict") != "NOT EQUIVALENT", out


def test_r49d_no_reshard_after_forward_loss_fn_read_is_equivalent(tmp_path):
    """r49d_03: r49c_01 with ``reshard_after_forward=False`` on the blocks, and ``loss_fn``
    reads the kept w2 weight (never freed inside the step for real). Truth right (4e-17).
    EQUIVALENT at 509cf78 (107 goals, 109 s)."""
    out = _prove("r49d_03_pp_no_reshard_after_forward_lossfn_read_right.py", tmp_path)
    assert _equivalent(out), out


def test_r49d_reentrant_ac_under_pipelining_is_not_accepted(tmp_path):
    """r49d_05: reentrant ``checkpoint_wrapper`` blocks under ``Schedule1F1B``: every real rank
    fails (reentrant checkpoint refuses the stage backward's ``inputs=``). At 509cf78: exit 3
    (75 s), the capture fails with the same RuntimeError."""
    out = _prove("r49d_05_pp_reentrant_ac_1f1b_kept_ref_read_crash.py", tmp_path)
    assert _not_accepted(out), out
