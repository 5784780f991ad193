"""Adversarial round 43c (``tests/adversarial/ATTEMPTS.md``, "Round 43c"), against
``merge/ppleaf43`` at b557eab: PP x FSDP2's faithful stand-in after the fixes of rounds 43a /
43b (``spec_lang/torch_frontend/pp_leaves.py``: ``writes_refused``, ``pre_backward_hooks``,
``_follows``). Plans in ``plans/round43c/``. Truth: ``tests/torch_frontend/pp_truth.py FILE``
(where one side has no gradient: a copy recording it instead of stopping). All slow.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND43C = Path(__file__).resolve().parent / "plans" / "round43c"

pytestmark = pytest.mark.slow


def _not_accepted(out: dict) -> bool:
    """Anything but EQUIVALENT (NOT EQUIVALENT, UNKNOWN or a refusal)."""
    return out["_rc"] != 0 and out.get("verdict") != "EQUIVALENT"


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND43C / name, tmp_path)


# -- findings ---------------------------------------------------------------------------------


def test_r43c_1_root_parameter_frozen_in_loss_fn_is_not_accepted(tmp_path):
    """R43c-1: EQUIVALENT at b557eab (106 goals, 95 s); truth: the real ``norm.weight`` gets a
    gradient (its unsharded parameter, gathered once, still requires grad), update 3.3e-4 off
    the spec's (no gradient: frozen before ``backward``). Since stop 43 a ``requires_grad``
    change inside ``schedule.step`` is refused: exit 3 (86 s)."""
    out = _prove("r43c_03_stored_frozen_in_loss_fn_root_gpipe.py", tmp_path)
    assert _not_accepted(out), out
    assert out["_rc"] == 3 and "changed inside schedule.step" in out.get("_err", ""), out


def test_r43c_2_c10d_write_into_the_stored_shard_is_not_accepted(tmp_path):
    """R43c-2: EQUIVALENT at b557eab (107 goals, 102 s); truth: gradients 4.0e-3 off,
    ``output.weight``'s update 6.0e-4 (real FSDP2 re-gathers the written shard for later
    micro-batches). Since stop 43 every tensor of a ``c10d`` op counts as written: exit 3
    (39 s, ``c10d.allreduce_.default writes into a parameter``)."""
    out = _prove("r43c_05_hook_c10d_allreduce_shard_restored_1f1b.py", tmp_path)
    assert _not_accepted(out), out
    assert out["_rc"] == 3 and "writes into a parameter" in out.get("_err", ""), out


# -- sound outcomes ---------------------------------------------------------------------------


def test_r43c_c10d_write_with_the_update_goal_stuck_is_not_accepted(tmp_path):
    """R43c-2 (sound here only by the rewriter): a hook's ``dist.all_reduce`` into the stored
    shard passes ``writes_refused`` (no ``Tensor(a!)`` in c10d schemas); truth wrong (grads
    4.0e-3 off); UNKNOWN at b557eab (124 s): every gradient goal proved (the stand-in's
    micro-batches read the unwritten leaf), the two ``w2`` update goals stuck."""
    out = _prove("r43c_01_hook_c10d_allreduce_shard_1f1b.py", tmp_path)
    assert _not_accepted(out), out


def test_r43c_c10d_write_view_spec_is_not_accepted(tmp_path):
    """r43c_01 with the spec's write as ``view(2, h, -1).mean(0)`` expanded: UNKNOWN (104 s),
    the same 2 update goals open; truth wrong (4.0e-3)."""
    out = _prove("r43c_04_hook_c10d_allreduce_shard_1f1b_view_spec.py", tmp_path)
    assert _not_accepted(out), out


def test_r43c_root_parameter_unfrozen_in_metadata_inference_is_not_refuted(tmp_path):
    """The stored ``norm.weight`` frozen before the step, unfrozen at every ``loss_fn`` call:
    right for real (5.6e-17); EQUIVALENT 107 at b557eab (104 s). Since R43c-1's fix a
    ``requires_grad`` change inside ``schedule.step`` is refused: exit 3 (89 s), a false
    refusal kept for soundness (FSDP2 follows the change only where it gathers again).
    Asserted: never NOT EQUIVALENT."""
    out = _prove("r43c_02_stored_unfrozen_in_loss_fn_root_gpipe.py", tmp_path)
    assert out.get("verdict") != "NOT EQUIVALENT", out
    assert out["_rc"] == 3 and "changed inside schedule.step" in out.get("_err", ""), out


def test_r43c_output_hook_after_fully_shard_is_refuted(tmp_path):
    """A forward hook registered after ``fully_shard`` halves the block's output gradient when
    its ``w1.grad`` is not None: wrong for real (9.0e-3); NOT EQUIVALENT at b557eab (83 s)."""
    out = _prove("r43c_06_output_hook_order_after_fully_shard_1f1b.py", tmp_path)
    assert out.get("verdict") == "NOT EQUIVALENT", out
