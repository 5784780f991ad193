"""Adversarial round 30c (``tests/adversarial/ATTEMPTS.md``, "Round 30c"), against wip/adv30c at
0295703 (= main: R30-1 ``all_reduce_mark.foreign_modes`` / ``pp_capture.p2p``, R30-2 (a) frozen
collector, R30-3 module attributes by identity, R30b-1 ``Lowering.fit``). Plans in
``plans/round30c/``. Truth: ``tests/adversarial/torch4_truth.py FILE 2`` (dp),
``tests/torch_frontend/pp_truth.py FILE`` (pp); gloo, float64.

* R30c-1 (false accept; ``r30c_01``, ``r30c_05`` dp 2, ``r30c_06`` pp 2): R30-1's check is a
  look at the mode stack *before* the call (``plain_call`` at the start of the wrapped
  ``dist.all_reduce``; ``foreign_modes()`` at the start of the capture's ``p2p``). The train
  file enters its DoneWork dispatch mode *inside* the call, from a hook torch's code runs after
  the check and before ``group.allreduce`` / ``group.send``: ``torch.Tensor.is_complex``
  replaced for the step (``r30c_01``, ``r30c_06``; torch.Tensor is not a watched namespace), or
  ``distributed_c10d._world._pg_coalesce_state`` replaced by a dict subclass whose
  ``__contains__`` enters the mode (``r30c_05``; data, not code). The mode is exited after the
  call (dp) or, in pp, by a replaced ``torch.Tensor.shape`` that the capture's ``p2p`` reads
  before its own check. Truth dp update 0.0067 / 0.0080 (step 2 0.0074 / 0.013; control
  ``r30c_02`` 5.6e-17); pp grad l0.weight 0.10, l1.weight 0.20, update 0.051 / 0.10.
  **Fixed in wip/fix31** (``spec_lang/torch_frontend/op_guard.py``): at every node recorded
  during the call, the frames between the call and the recording must be code that existed
  before the train file ran (the mode's ``__torch_dispatch__`` is on that path while torch has
  popped the mode off the stack), and ``torch.Tensor`` / ``TensorBase`` / ``distributed_c10d``'s
  state are compared before and after the call; all three refused, exit 3.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND30C = Path(__file__).resolve().parent / "plans" / "round30c"


def _not_accepted(out: dict) -> bool:
    """Anything but EQUIVALENT: NOT EQUIVALENT, UNKNOWN or a refusal (exit 3)."""
    return out["_rc"] != 0 and out.get("verdict") != "EQUIVALENT"


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND30C / name, tmp_path)


@pytest.mark.slow
def test_r30c_1_mode_entered_in_is_complex_all_reduce_is_refused(tmp_path):
    """EQUIVALENT at 0295703 (4 goals, 50 s); truth update 0.0067 / 0.0080. Refused since
    wip/fix31, naming the all-reduce's line and the mode's frame on the op's path."""
    out = _prove("r30c_01_dp_mode_entered_in_is_complex.py", tmp_path)
    assert _not_accepted(out) and out["_rc"] == 3, out
    assert "r30c_01_dp_mode_entered_in_is_complex.py:86: dist.all_reduce did not run as " \
           "torch ships it: code of the train file ran inside the call, at " in out["_err"], out
    assert "r30c_01_dp_mode_entered_in_is_complex.py:30 (__torch_dispatch__)" in out["_err"]


@pytest.mark.slow
def test_r30c_1_mode_entered_in_coalesce_state_all_reduce_is_refused(tmp_path):
    """EQUIVALENT at 0295703 (4 goals, 34 s); truth as r30c_01. Refused since wip/fix31."""
    out = _prove("r30c_05_dp_mode_entered_in_coalesce_state.py", tmp_path)
    assert _not_accepted(out) and out["_rc"] == 3, out
    assert "r30c_05_dp_mode_entered_in_coalesce_state.py:91: dist.all_reduce did not run as " \
           "torch ships it: code of the train file ran inside the call, at " in out["_err"], out
    assert "r30c_05_dp_mode_entered_in_coalesce_state.py:32 (__torch_dispatch__)" in out["_err"]


@pytest.mark.slow
def test_r30c_1_mode_entered_in_pp_transfers_is_refused(tmp_path):
    """EQUIVALENT at 0295703 (9 goals, 107 s); truth grad 0.10 / 0.20. Refused since
    wip/fix31, naming the mode's frame on the transfer's op path."""
    out = _prove("r30c_06_pp_mode_entered_in_is_complex.py", tmp_path)
    assert _not_accepted(out) and out["_rc"] == 3, out
    assert "r30c_06_pp_mode_entered_in_is_complex.py:115: torch's schedule transfers not run " \
           "as torch ships them (code of the train file ran inside the call, at " in out["_err"]
    assert "r30c_06_pp_mode_entered_in_is_complex.py:53 (__torch_dispatch__)" in out["_err"]


@pytest.mark.slow
def test_r30c_expand_t_matmul_right_is_equivalent(tmp_path):
    """``s.t() @ m`` (s a broadcast vector, m square) in both steps: EQUIVALENT (8 goals);
    its buggy twin ``r30c_03`` (``s @ m`` in the plan) is refused (exit 3, "repeated dim")."""
    out = _prove("r30c_04_expand_t_matmul_ddp_right.py", tmp_path)
    assert out["_rc"] == 0 and out["verdict"] == "EQUIVALENT", out
    bad = _prove("r30c_03_expand_t_matmul_ddp.py", tmp_path)
    assert _not_accepted(bad), bad
