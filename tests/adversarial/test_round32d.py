"""Adversarial round 32d (``tests/adversarial/ATTEMPTS.md``, "Round 32d"), against wip/adv32d at
52ab29b (= main: stop 32's ``dispatcher_guard`` after round 32b: the ``_LoggedModule`` log of
kernels registered through ``torch.library`` libraries, the Python dispatcher's enabling by the
train file logged, ``DispatchKey`` entries of ``_dispatch_cache`` checked with ``resolve_key``;
R32b-4's ``RankValues.real_values``). Plans in ``plans/round32d/``. Truth:
``tests/adversarial/torch4_truth.py FILE 2`` (dp), ``tests/adversarial/tp_truth.py FILE`` (dp x
tp); gloo, float64.

* R32d-1 (false accept; ``r32d_01`` dp 2): a ``HigherOrderOperator`` made in the step
  dispatches its ``py_kernels`` in Python without the Python dispatcher; its CPU kernel leaves
  the all-reduced gradient summed, its ``python_key_table`` entries for the capture's modes
  divide; popped from ``_higher_order_ops`` and its tables cleared before the post-step scan.
  Truth 0.0070 / 0.0093 (control ``r32d_02`` 2.8e-17, EQUIVALENT).
* R32d-2 (false accept; ``r32d_03`` dp 2): torch's ``_EnablePythonDispatcher`` taken out of the
  guard's wrapper's closure (cell ``enable``): r32b_02 unlogged. The r32b_06 family. Truth
  0.0070 / 0.0093.
* R32d-3 (false accept; ``r32d_04`` dp 2): ``_LoggedModule._m`` is torch's raw module:
  ``lib.m._m.impl`` registers a CPU kernel of ``aten::div_.Tensor`` in the step unlogged and
  ``reset()`` removes it; the library is made at import at a forged torch site. Truth 0.0070 /
  0.0093.
* R32d-4 (false refusal; ``r32d_07``, ``r32d_06`` dp 2 x tp 2): ``check_real_ranks`` compares the
  dp group's torchbind constant across tp coordinates: every hand-written ``dist`` collective
  over one axis of a 2-axis mesh is refused (exit 3). Truth 2.8e-17 / 0.0.
* R32d-5 (false accept; ``r32d_09`` dp 2 x tp 2): R32b-4 at the off-axis corner (dp 1, tp 1):
  ``RankValues.real_values`` holds the on-axis ranks only. Truth 0.051 (control ``r32d_10`` 0.0,
  EQUIVALENT).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND32D = Path(__file__).resolve().parent / "plans" / "round32d"


def _not_accepted(out: dict) -> bool:
    """Anything but EQUIVALENT (NOT EQUIVALENT, UNKNOWN or a refusal)."""
    return out["_rc"] != 0 and out.get("verdict") != "EQUIVALENT"


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND32D / name, tmp_path)


# -- findings (strict xfail: the right outcome asserted) ---------------------------------------

@pytest.mark.slow
def test_r32d_1_dp_hop_made_in_step_is_not_accepted(tmp_path):
    """EQUIVALENT at 52ab29b (4 goals, 43 s); truth update 0.0070 / 0.0093."""
    out = _prove("r32d_01_dp_hop_made_in_step.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r32d_1_control_right_hop_is_equivalent(tmp_path):
    """The same HOP with a right CPU kernel: truth 2.8e-17, EQUIVALENT at 52ab29b (85 s). When
    R32d-1 is fixed by refusing any HOP made in the step this may turn into a refusal: a
    train file's own HigherOrderOperator is not a normal plan, so that refusal is acceptable."""
    out = _prove("r32d_02_dp_hop_made_in_step_right.py", tmp_path)
    assert _equivalent(out) or out["_rc"] == 3, out


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R32d-2: torch's _EnablePythonDispatcher taken out of the "
                   "guard's wrapper's closure (the R32b-3 r32b_06 family)")
def test_r32d_2_dp_python_dispatcher_from_closure_is_not_accepted(tmp_path):
    """EQUIVALENT at 52ab29b (4 goals, 81 s); truth update 0.0070 / 0.0093."""
    out = _prove("r32d_03_dp_python_dispatcher_from_closure.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R32d-3: the raw _DispatchModule behind _LoggedModule "
                   "(lib.m._m.impl / reset) registers and removes a kernel in the step unlogged")
def test_r32d_3_dp_logged_module_raw_m_impl_is_not_accepted(tmp_path):
    """EQUIVALENT at 52ab29b (4 goals, 65 s); truth update 0.0070 / 0.0093."""
    out = _prove("r32d_04_dp_logged_module_raw_m_impl.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R32d-4: a process group per rank is compared as a "
                   "constant by literals.Traces.constant_differs: UNKNOWN (real_ranks no longer "
                   "refuses it; comparing it by axis made r32d_06 NOT EQUIVALENT 2x while its "
                   "truth is 0.0: open, see ATTEMPTS.md Round 32d)")
def test_r32d_4_dp_tp_replicated_ddp_right_is_equivalent(tmp_path):
    """t02_corner_rank_2d without the doubling (truth 2.8e-17): exit 3 at 52ab29b (126 s),
    "rank {'dp': 0, 'tp': 1} at the real sizes: the captured constant _torchbind_obj0
    differs from the zero coordinate's"."""
    out = _prove("r32d_07_dp_tp_replicated_ddp_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R32d-4: a process group per rank is compared as a "
                   "constant by literals.Traces.constant_differs: UNKNOWN (real_ranks no longer "
                   "refuses it; comparing it by axis made r32d_06 NOT EQUIVALENT 2x while its "
                   "truth is 0.0: open, see ATTEMPTS.md Round 32d)")
def test_r32d_4_dp_tp_vocab_right_is_equivalent(tmp_path):
    """r32b_04 on dp 2 x tp 2 with a hand-written DDP (truth 0.0): exit 3 at 52ab29b (108 s)."""
    out = _prove("r32d_06_dp_tp_vocab_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
def test_r32d_dp_tp_vocab_offset_wrong_at_corner_is_not_accepted(tmp_path):
    """Corner-only real-size offset (truth 0.051): exit 3 at 52ab29b (R32d-4's reason). Stays
    asserted once R32d-4 is fixed: the corner's real-size values must then be checked."""
    out = _prove("r32d_05_dp_tp_vocab_offset_wrong_at_corner.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r32d_fsdp_tp_hand_written_masks_is_not_accepted(tmp_path):
    """FSDP2 x hand-written vocab-parallel masks (truth 0.095): UNKNOWN at 52ab29b (115 s)."""
    out = _prove("r32d_08_fsdp_tp_vocab_hand_written_masks.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r32d_5_dp_tp_vocab_offset_wrong_at_corner_is_not_accepted(tmp_path):
    """EQUIVALENT at 52ab29b (2 goals, 98 s); truth emb.weight 0.051 (control r32d_10 0.0)."""
    out = _prove("r32d_09_dp_tp_funcol_vocab_offset_wrong_at_corner.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r32d_5_control_dp_tp_funcol_vocab_right_is_equivalent(tmp_path):
    """r32d_09's control (truth 0.0): EQUIVALENT at 52ab29b (98 s)."""
    out = _prove("r32d_10_dp_tp_funcol_vocab_right.py", tmp_path)
    assert _equivalent(out), out
