"""Round 48d: break stop 48's FSDP2 unsharded leaf (``fsdp_unsharded``: one leaf
``nn.Parameter`` per sharded parameter for the step, refilled in place, ``freed`` after a
resharding post-backward, ``left_over``) at 6805dcc (``tests/adversarial/ATTEMPTS.md``, "Round
48d"). Plans in ``plans/round48d/``. Truth: ``tests/adversarial/torch4_truth.py FILE 2`` (dp 2,
gloo, float64, two steps). No false accept was found: these pin the sound outcomes; R48d-1 was
a needless refusal (since stop 48 a rightful UNKNOWN: the step leaves requires_grad apart).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROUND48D = Path(__file__).resolve().parent / "plans" / "round48d"

pytestmark = pytest.mark.slow


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND48D / name, tmp_path)


@pytest.mark.parametrize("name", [
    "r48d_01_set_clone_then_refill_wrong.py",
    "r48d_02_set_clone_across_steps_wrong.py",
    "r48d_03_swap_tensors_leaf_wrong.py",
    "r48d_07_requires_grad_off_forward1_wrong.py",
])
def test_r48d_wrong_plans_are_not_accepted(name, tmp_path):
    """Round 48d wrong plans (truth > 1e-9 at 2 dp ranks), not EQUIVALENT at 6805dcc:
    r48d_01 ``set_`` detaching the unsharded leaf from the all-gather output (exit 3, 66 s),
    r48d_02 the same across steps (UNKNOWN, no lowering rule for ``aten.set_``, 65 s),
    r48d_03 ``torch.utils.swap_tensors`` on the leaf (exit 3: weakref, 21 s), r48d_07
    ``requires_grad_(False)`` on the leaf in forward 1 only, reset by FSDP2's re-gather
    (exit 3: the parallel step produces grad:w1.weight, 43 s)."""
    out = _prove(name, tmp_path)
    assert not _equivalent(out), out


@pytest.mark.parametrize("name", [
    "r48d_04_preset_grad_on_leaf_right.py",
    "r48d_05_backward_grad_tensors_right.py",
    "r48d_08_preset_noncontig_grad_on_leaf_right.py",
])
def test_r48d_right_plans_are_accepted(name, tmp_path):
    """Round 48d right plans (truth <= 6e-17), EQUIVALENT at 6805dcc (6 goals, 44-60 s): a
    ``.grad`` preset on the unsharded leaf before the backward (contiguous / transposed
    strides), ``torch.autograd.backward(loss, grad_tensors=2.0)``."""
    out = _prove(name, tmp_path)
    assert _equivalent(out), out


@pytest.mark.parametrize("name", [
    "r48d_09_replicate_requires_grad_off_forward1_right.py",
    "r48d_10_requires_grad_off_forward1_raf_false_right.py",
])
def test_r48d_1_frozen_leaf_kept_unsharded_is_accepted(name, tmp_path):
    """R48d-1: a forward pre-hook freezes w1's unsharded leaf in forward 1 only; the unit is not
    resharded after forward (FSDP-based ``replicate``; ``fully_shard(reshard_after_forward=
    False)``), so real forward 2 does not re-gather and the leaf stays frozen as serial w1 does.
    Truth right (0.0); exit 3 at 6805dcc (45 s / 61 s: "the parallel step produces
    'grad:w1.weight', which the single-device step does not"). Since stop 48 (a held leaf is
    reused frozen, ``Hold.view``): UNKNOWN, rightly: the step leaves the serial w1 frozen and
    the sharded w1 requiring grad, so the next step differs (``w1.weight.requires_grad``)."""
    out = _prove(name, tmp_path)
    assert out["_rc"] == 2 and out.get("verdict") == "UNKNOWN", out
    assert "w1.weight.requires_grad" in json.dumps(out), out
