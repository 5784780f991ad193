"""Round 46c: break stop 46's FSDP2 gradient timing after round 46b, against 2f34073
(``tests/adversarial/ATTEMPTS.md``, "Round 46c"). Plans in ``plans/round46c/``. Truth:
``tests/adversarial/torch4_truth.py FILE 2`` (dp 2) or ``tests/adversarial/mesh_truth.py FILE 4``
(any ``MESH``, e.g. HSDP 2 x 2: the batch split over the global rank).

R46c-1: FSDP2 reads a unit's gradient divide factor in its post-backward (``foreach_reduce``);
the stand-in fixes it at the gather in the forward (``dataparallel._unit_view``:
``u.factor()``). ``set_gradient_divide_factor`` between the forward and the backward: a wrong
plan EQUIVALENT, its right control NOT EQUIVALENT.

R46c-2: FSDP2's group post-backward reshards EVERY member of a ``fully_shard([a, b])`` group,
then reduces and runs the post-accumulate-grad hooks; the stand-in (``RegisterPostBackward``'s
backward calling ``Hold.in_backward`` hold by hold, and ``fsdp_hold._final`` likewise) releases
and flushes one member's hold before the next member's is released: a hook on the first
member's parameter sees the second member still unsharded (not a DTensor). Wrong plans
EQUIVALENT (1-D, HSDP, and in the root's final callback).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROUND46C = Path(__file__).resolve().parent / "plans" / "round46c"

pytestmark = pytest.mark.slow


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(path: Path, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(path, tmp_path)


def test_r46c_1_divide_factor_after_forward_not_equivalent(tmp_path):
    """R46c-1: ``model.w2.set_gradient_divide_factor(1.0)`` after the forward, 2.0 again after
    the backward: for real w2's gradient is the sum (doubled). Truth wrong (w2 0.0119 at step
    2); EQUIVALENT at 2f34073 (44 s) and at 60fadce (45 s): pre-existing. Since stop 46
    (``Hold.flush`` divides by the factor at the post-backward): NOT EQUIVALENT (43 s)."""
    out = _prove(ROUND46C / "r46c_01_divide_factor_set_after_forward_wrong.py", tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


def test_r46c_1_divide_factor_after_forward_right_not_refuted(tmp_path):
    """R46c-1's right control: the same, w2's gradient halved after the backward. Truth
    right (2.8e-17); NOT EQUIVALENT at 2f34073 (46 s): a false refutation. EQUIVALENT since
    stop 46 (42 s)."""
    out = _prove(ROUND46C / "r46c_02_divide_factor_set_after_forward_halved_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.parametrize("name", [
    "r46c_03_group_hook_sees_next_member_resharded_wrong.py",
    "r46c_07_hsdp_group_hook_sees_next_member_resharded_wrong.py",
    "r46c_09_group_final_callback_hook_sees_next_member_wrong.py",
])
def test_r46c_2_group_hook_sees_member_resharded_not_equivalent(name, tmp_path):
    """R46c-2: group [w1, w2] (+ root); a post-accumulate-grad hook on w1.weight doubles its
    gradient when ``model.w2.weight`` is not a DTensor. Truth wrong (r46c_03 w1 0.0020 / 0.0027,
    r46c_07 HSDP w1 0.0042, r46c_09 final callback w1 0.0087); EQUIVALENT at 2f34073 (43 / 77
    / 47 s); r46c_03 NOT EQUIVALENT at 60fadce (46 s): a regression of stop 46, fixed in stop
    46 (the group reshards, then its gradients are set: ``RegisterPostBackward``, ``_final``):
    NOT EQUIVALENT (43-44 s)."""
    out = _prove(ROUND46C / name, tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


def test_r46c_hsdp_post_accumulate_hook_order_not_equivalent(tmp_path):
    """R46b-1 on HSDP (dp_replicate 2 x dp_shard 2): truth wrong (w1 0.0164); NOT EQUIVALENT
    (75 s)."""
    out = _prove(ROUND46C / "r46c_06_hsdp_post_accumulate_hook_order_wrong.py", tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


@pytest.mark.parametrize("name", [
    "r46c_04_clip_grad_norm_in_post_accumulate_hook_right.py",
    "r46c_05_optimizer_in_backward_right.py",
    "r46c_08_hsdp_clip_grad_norm_in_hook_right.py",
    "r46c_11_grad_accumulation_hook_reads_grad_right.py",
])
def test_r46c_right_plans_equivalent(name, tmp_path):
    """Right plans (truth <= 2.8e-17) that must stay EQUIVALENT: ``clip_grad_norm_`` inside a
    post-accumulate-grad hook (1-D 43 s, HSDP 75 s), optimizer in backward (a per-parameter
    SGD stepped and cleared in the hook, 43 s); two backwards
    per step with a hook reading another unit's ``.grad`` and a ``.grad`` identity check (46 s)."""
    out = _prove(ROUND46C / name, tmp_path)
    assert _equivalent(out), out


@pytest.mark.parametrize("name", [
    "r46c_10_grad_accumulation_zero_grad_keep_identity_right.py",
    "r46c_12_zero_grad_keep_plain_right.py",
])
def test_r46c_3_zero_grad_keep_equivalent(name, tmp_path):
    """R46c-3: a step ending with ``optimizer.zero_grad(set_to_none=False)`` (r46c_10: with two
    backwards and hooks; r46c_12: plain): truth right (2.8e-17); UNKNOWN at 2f34073, internal
    ``TermError: CONST ... has no dim 'ffn'`` (44 s each); r46c_12 the same at 60fadce.
    Since stop 46 (``frontend._through``: a value constant along the sharded dim is its own
    shard): EQUIVALENT (35 / 42 s)."""
    out = _prove(ROUND46C / name, tmp_path)
    assert _equivalent(out), out


def test_r46c_3_zero_grad_keep_mutant_not_equivalent(tmp_path):
    """r46c_13 (the lead): r46c_12 whose kept sharded gradients get +1 only under FSDP2 (a
    DTensor ``.grad``): truth wrong (0.1 at step 2); NOT EQUIVALENT on grad_left:w1.weight
    (45 s): the goal built from the constant spec value still compares."""
    out = _prove(ROUND46C / "r46c_13_zero_grad_keep_sharded_grad_bumped_wrong.py", tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out
    assert "grad_left:w1.weight" in json.dumps(out), out
