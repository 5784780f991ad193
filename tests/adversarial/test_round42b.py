"""Adversarial round 42b (``tests/adversarial/ATTEMPTS.md``, "Round 42b"), against ppfsdp42 at
49995e9: when the gradient goals are read (``spec_lang/torch_frontend/grad_snapshot.py``) and
PP x FSDP2's ``AutogradStateGuard`` after round 42a
(``spec_lang/torch_frontend/pp_data_parallel.py``). Plans in ``plans/round42b/``. Truth:
``tests/torch_frontend/pp_truth.py FILE`` (PP) or ``tests/adversarial/torch4_truth.py FILE 2``
(1-D dp). All slow (every prove traces several processes).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND42B = Path(__file__).resolve().parent / "plans" / "round42b"

pytestmark = pytest.mark.slow


def _not_accepted(out: dict) -> bool:
    """Anything but EQUIVALENT (NOT EQUIVALENT, UNKNOWN or a refusal)."""
    return out["_rc"] != 0 and out.get("verdict") != "EQUIVALENT"


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND42B / name, tmp_path)


# -- findings ---------------------------------------------------------------------------------


def test_r42b_1_grad_read_by_a_c_hook_in_backward_is_not_accepted(tmp_path):
    """EQUIVALENT at 49995e9 (107 goals, 42 s); truth: ``output.weight``'s gradient 0.057 off,
    update 6.0e-4 (1F1B: B1's gradient replaced by the unsharded leaf's accumulated
    micro-batch 0 gradient). Fixed (wip/ppleaf: ``pp_leaves``, the stage holds FSDP2's
    unsharded leaves, so the hook reads the real run's ``.grad``): NOT EQUIVALENT (71 s,
    ``output.weight`` and its AdamW state refuted)."""
    out = _prove("r42b_01_grad_hook_getattr_partial_wrong.py", tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


def test_r42b_1_grad_read_by_a_python_hook_in_backward_is_not_accepted(tmp_path):
    """EQUIVALENT at 49995e9 (107 goals, 36 s); truth as r42b_01 (0.057 / 6.0e-4). Fixed
    (``pp_leaves``): NOT EQUIVALENT (39 s), as r42b_01."""
    out = _prove("r42b_02_grad_hook_python_lambda_wrong.py", tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


# -- sound outcomes ---------------------------------------------------------------------------


# r42b_03 (the hand clip not clamped, AdamW: NOT EQUIVALENT at ``exp_avg_sq:w1.weight``) is
# the same program as ``plans/round42/r42_04_clip_by_hand_unclamped_adamw_wrong.py``, asserted
# in ``test_round42.py``; its copy here was dropped at stop 43.
