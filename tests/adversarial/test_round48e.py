"""Round 48e: break stop 48's FSDP2 unsharded leaf (``fsdp_unsharded``) after rounds 48a-48d, at
116519d (``tests/adversarial/ATTEMPTS.md``, "Round 48e"). Plans in ``plans/round48e/``. Truth:
``tests/adversarial/torch4_truth.py FILE 2`` (dp 2, gloo, float64, two steps).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND48E = Path(__file__).resolve().parent / "plans" / "round48e"

pytestmark = pytest.mark.slow


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND48E / name, tmp_path)


@pytest.mark.parametrize("name", [
    "r48e_01_held_leaf_frozen_step2_wrong.py",
    "r48e_02_held_leaf_frozen_reshard_unshard_wrong.py",
    "r48e_05_hook_writes_leaf_during_backward_wrong.py",
    "r48e_07_inference_mode_gather_then_grad_forward_crash.py",
])
def test_r48e_wrong_plans_are_not_accepted(name, tmp_path):
    """Round 48e wrong plans (truth > 1e-9): at 116519d r48e_01 UNKNOWN (70 s), r48e_02 exit 3
    (84 s), r48e_05 NOT EQUIVALENT (64 s); r48e_07 (real torch
    fails on the inference tensor) exit 3 (20 s)."""
    out = _prove(name, tmp_path)
    assert not _equivalent(out), out


@pytest.mark.parametrize("name", [
    "r48e_03_no_grad_gather_then_grad_forward_right.py",
    "r48e_06_unshard_after_post_backward_late_grad_right.py",
])
def test_r48e_right_plans_are_accepted(name, tmp_path):
    """Round 48e right plans: EQUIVALENT at 116519d (6 goals, 82 s / 65 s)."""
    out = _prove(name, tmp_path)
    assert _equivalent(out), out


@pytest.mark.xfail(strict=True, reason="R48e-1: a write into the sharded parameter during the "
                   "backward, after its leaf's accumulation, is refused by "
                   "recompute.gathered_then_written (needless refusal)")
def test_r48e_1_hook_writes_sharded_during_backward_is_accepted(tmp_path):
    """R48e-1 (needless refusal): truth right (w1 8.7e-19); exit 3 at 116519d (21 s, "a
    parameter of fully_shard is written in place between its all-gather for the forward and
    the backward")."""
    out = _prove("r48e_04_hook_writes_sharded_during_backward_right.py", tmp_path)
    assert _equivalent(out), out
