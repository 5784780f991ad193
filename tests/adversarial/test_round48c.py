"""Round 48c: break stop 48's FSDP2 unsharded leaf after rounds 48a-48b (``fsdp_unsharded``:
one leaf per sharded parameter for the step, refilled in place, ``left_over`` at the end of
the step, the stand-in's own post-accumulate-grad hook checked by key and function), against
84c96a2 (``tests/adversarial/ATTEMPTS.md``, "Round 48c"). Plans in ``plans/round48c/``. Truth:
``tests/adversarial/torch4_truth.py FILE 2``.

R48c-1 (fixed in stop 48: no hook of the stand-in's on the leaf; NOT EQUIVALENT 14 s): the
stand-in registered its own post-accumulate-grad hook on each unsharded leaf at the gather
(``fsdp_unsharded._hook``); real FSDP2 registers none. A step that reads the leaf's hook
registry in the forward sees one more hook than for real: by the private dict (r48c_01) or
through public API, the handle's ``hooks_dict_ref()`` of a hook it registers and removes
(r48c_05; r48c_07 under the FSDP-based ``replicate``).
R48c-2 (fixed in stop 48: the layout, neg and conj bits compared; exit 3, 5 s): ``left_over``
read a leaf's ``.grad``, hooks, class and ``__dict__``, not its C flags: the negative bit set on
the leaf at the end of the step (``torch._C._set_neg``) stays on FSDP2's one unsharded
parameter, so step 2 reads -W (r48c_02).
R48a-2 (again; refused since stop 48 as a layout change, exit 3): r48c_06 restrides the leaf
kept from the forward at the end of the step (``as_strided_``); its storage is freed for real
(both ranks die), EQUIVALENT.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND48C = Path(__file__).resolve().parent / "plans" / "round48c"

pytestmark = pytest.mark.slow


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(path: Path, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(path, tmp_path)


@pytest.mark.parametrize("name", [
    "r48c_01_own_hook_visible_in_forward_wrong.py",
    "r48c_05_own_hook_counted_by_handle_wrong.py",
    "r48c_07_replicate_own_hook_counted_wrong.py",
])
def test_r48c_1_own_hook_visible(name, tmp_path):
    """R48c-1: truth wrong in step 1 (w0 0.0075, w1 0.0024, w2 0.0030; all three); EQUIVALENT
    at 84c96a2 (6 goals, 45-48 s); NOT EQUIVALENT since stop 48 (14 s)."""
    out = _prove(ROUND48C / name, tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


def test_r48c_2_neg_bit_on_leaf(tmp_path):
    """R48c-2: truth wrong in step 2 (w0 0.0099, w1 0.0047, w2 0.0008); EQUIVALENT at 84c96a2
    (47 s)."""
    out = _prove(ROUND48C / "r48c_02_neg_bit_on_leaf_wrong.py", tmp_path)
    assert out["_rc"] == 3 and "layout" in out["_err"] and "w2.weight" in out["_err"], out


def test_r48a_2_restride_freed_leaf(tmp_path):
    """R48a-2 again: r48c_06 (``as_strided_`` on the leaf after the step): both real ranks die
    (setStorage out of bounds for storage of size 0); EQUIVALENT at 84c96a2 (16 s); exit 3 as a
    layout change in stop 48; since stop 49 exit 3 as a read of freed memory (``fsdp_freed``,
    6 s)."""
    out = _prove(ROUND48C / "r48c_06_as_strided_leaf_wrong.py", tmp_path)
    assert out["_rc"] == 3 and "R48a-2" in out["_err"] and "w2.weight" in out["_err"], out


def test_r48c_wrong_zero_grad_between_forward_and_backward(tmp_path):
    """r48c_04: fwd/bwd, fwd, ``model.zero_grad(set_to_none=False)``, bwd: truth wrong (w0
    0.0073: the root's module holds its leaf, the sharded w0 keeps g1); NOT EQUIVALENT at
    84c96a2 (46 s): sound."""
    out = _prove(ROUND48C / "r48c_04_model_zero_grad_keep_between_fwd_bwd_wrong.py", tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


@pytest.mark.parametrize("name", [
    "r48c_03_accum_opt_step_between_right.py",
    "r48c_08_checkpoint_accum_opt_step_between_right.py",
    "r48c_10_hook_dict_emptied_in_forward_restored_right.py",
])
def test_r48c_right_plans(name, tmp_path):
    """Right plans (truth <= 2.8e-17): fwd/bwd, opt.step, fwd/bwd in one step (refills), also
    with w1 under non-reentrant checkpointing; every leaf's post-accumulate dict emptied in the
    forward and restored after the backward; EQUIVALENT at 84c96a2 (50 s, 16 s, 16 s)."""
    out = _prove(ROUND48C / name, tmp_path)
    assert _equivalent(out), out
