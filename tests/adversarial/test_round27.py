"""Adversarial round 27 (``tests/adversarial/ATTEMPTS.md``, "Round 27"), against the composition
of ``dist.all_reduce`` over the pipeline group in ``prove --torch`` (wip/adv27 at 7853637:
``pp_merge.merge_stages`` composes the k-th ``c10d.allreduce_`` on the pp group of every stage
into one sum / mean / maximum written back in place). Plans in ``plans/round27/`` (r22_16's
tied embedding / head over pp 2 x dp 2, GPipe, or ``examples/torch/mlp_ddp.py`` for the
dp-only ones), so a prove takes 40-120 s on the shared machine. Truth:
``tests/torch_frontend/pp_truth.py`` (gloo, float64, one process per rank) and
``tests/adversarial/torch4_truth.py`` (dp only).

R27-1 (an all-reduce of a non-contiguous tensor: not lowered, UNKNOWN; on the pipeline group
refused) and R27-2 (``async_op=True``: not lowered; on the pipeline group refused) are fixed
and asserted below; R27-3 is refused since the train file's own send / recv are (round 26's
fix). The findings:

* R27-1 (``r27_03``, ``r27_23``, ``r27_16``; ``r27_17`` on this branch's dp path): an
  all-reduce of a non-contiguous tensor is composed / lowered as the sum of its logical
  elements; gloo reduces ``numel`` elements of raw storage from the data pointer (NCCL refuses
  such a tensor). A column-major buffer on one stage (r27_03, r27_23: truth grad 0.44, update
  0.22) or a buffer with a row gap (r27_16: 0.39 / 0.20; r27_17: update 0.0057, control
  ``mlp_ddp.py`` 5.6e-17).
* R27-2 (``r27_19``; ``r27_20`` on the dp path, main too): ``async_op=True`` is the schema
  default of ``c10d.allreduce_``, so make_fx leaves it out of the node and ``pp_merge``'s
  async refusal never fires (nor does anything on the dp path): the all-reduce is composed as
  synchronous at its call, and a read of the tensor before ``work.wait()`` (r27_19: truth grad
  0.0018, update 0.00088; control r27_05) or without any wait (r27_20: update 0.0067) is
  proved as if after the sum.
* R27-3 (``r27_15``, minor: a hang, not a different step): the composition queues a send, but
  gloo's ``send`` blocks until the receive is posted; a stage that sends and then all-reduces
  while the other all-reduces and then receives hangs for real (truth: timeout), EQUIVALENT.

The rest assert today's right outcomes (the base, clipping across stages, MAX, weight
averaging, an alias taken before the all-reduce, the refusals).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.adversarial.torch_prove import prove

ROUND27 = Path(__file__).resolve().parent / "plans" / "round27"

pytestmark = pytest.mark.slow


def _not_accepted(out: dict) -> bool:
    """Anything but EQUIVALENT: NOT EQUIVALENT, UNKNOWN or a refusal (exit 3)."""
    return out["_rc"] != 0 and out.get("verdict") != "EQUIVALENT"


# -- findings: R27-1, R27-2 and R27-3 fixed (stop 29) -----------------------------------------

def test_r27_1_transposed_buffer_on_one_stage_is_not_accepted(tmp_path):
    """The last stage all-reduces through a column-major (v, h) buffer, the first stage the
    row-major gradient: for real a transposed sum (truth grad 0.44, update 0.22)."""
    out = prove(ROUND27 / "r27_03_transposed_buffer.py", tmp_path)
    assert _not_accepted(out), out


def test_r27_1_column_major_copy_on_one_stage_is_not_accepted(tmp_path):
    """r27_03 without an uninitialised buffer: g.t().contiguous().t() on the last stage (truth
    grad 0.44, update 0.22)."""
    out = prove(ROUND27 / "r27_23_column_major_copy.py", tmp_path)
    assert _not_accepted(out), out


def test_r27_1_strided_buffer_over_pp_is_not_accepted(tmp_path):
    """torch.empty_strided(shape, (2 * h, 1)) on both stages (truth grad 0.39, update 0.20)."""
    out = prove(ROUND27 / "r27_16_pp_strided_buffer.py", tmp_path)
    assert _not_accepted(out), out


def test_r27_1_strided_buffer_over_dp_is_not_accepted(tmp_path):
    """mlp_ddp.py through torch.empty_strided(shape, (2 * cols, 1)) buffers (truth update
    0.0057 / 0.0069; control mlp_ddp.py 5.6e-17)."""
    out = prove(ROUND27 / "r27_17_dp_strided_buffer.py", tmp_path)
    assert _not_accepted(out), out


def test_r27_2_pp_read_before_wait_is_not_accepted(tmp_path):
    """The first stage reads the tied gradient between the async pp all-reduce and
    work.wait() (truth grad 0.0018, update 0.00088; control r27_05 EQUIVALENT, truth ~1e-16)."""
    out = prove(ROUND27 / "r27_19_async_ar_read_before_wait.py", tmp_path)
    assert _not_accepted(out), out


def test_r27_2_dp_async_never_waited_is_not_accepted(tmp_path):
    """mlp_ddp.py with async_op=True and no wait (truth update 0.0067 / 0.0080)."""
    out = prove(ROUND27 / "r27_20_dp_async_no_wait.py", tmp_path)
    assert _not_accepted(out), out


def test_r27_3_send_then_all_reduce_wait_cycle_is_refused(tmp_path):
    """Fixed by round 26's refusal of the train file's own transfers (r27_15b, the control
    without the wait cycle, is refused too: a false refusal)."""
    for name in ("r27_15_send_then_ar_hang.py", "r27_15b_send_then_ar_control.py"):
        out = prove(ROUND27 / name, tmp_path)
        assert out["_rc"] == 3 and "transfers a tensor that the schedule does not" in \
            out["_err"], out


# -- right outcomes today -------------------------------------------------------------------

@pytest.mark.parametrize("name", [
    "r27_01_tied_ar_right.py",                    # the base (truth 5.6e-17)
    "r27_05_clip_pp_tied_once_right.py",          # clipping across stages, tied counted once
    "r27_12_weight_avg_after_grad_sum_right.py",  # copies' weights averaged after the step
    "r27_22_three_stages_full_pp_group_right.py", # 3 stages, the middle adds zeros
])
def test_right_files_are_equivalent(name, tmp_path):
    out = prove(ROUND27 / name, tmp_path)
    assert out["verdict"] == "EQUIVALENT" and out["_rc"] == 0, out


@pytest.mark.parametrize("name", [
    "r27_06_clip_pp_tied_twice.py",               # the tied weight counted on both stages
    "r27_07_weight_avg_instead_of_grad_sum.py",   # half the step
    "r27_08_tied_ar_max.py",                      # MAX where the sum is needed
    "r27_13_alias_before_ar.py",                  # an alias taken before reads the sum
])
def test_wrong_files_are_not_equivalent(name, tmp_path):
    out = prove(ROUND27 / name, tmp_path)
    assert out["verdict"] == "NOT EQUIVALENT" and out["_rc"] == 1, out


@pytest.mark.parametrize("name,why", [
    ("r27_02_tied_ar_col_halves.py", "in-place write through a slice"),
    ("r27_11_tied_new_subgroup.py", "differs at rank"),
    ("r27_14_three_stages_emb_subgroup_right.py", "is not one of the mesh's axes"),
    ("r27_21_max_of_equal_copies_right.py", "MAXIMUM"),      # a false refusal (minor)
])
def test_not_proved(name, why, tmp_path):
    out = prove(ROUND27 / name, tmp_path)
    assert out["verdict"] == "UNKNOWN" and out["_rc"] == 2, out
    assert why in str(out["open"]), out["open"]


def test_all_reduce_in_the_stage_forward_is_refused(tmp_path):
    """Every stage forward all-reduces over pp: the first stage would wait before it sends
    (a hang for real): refused naming the line."""
    out = prove(ROUND27 / "r27_18_ar_in_stage_forward.py", tmp_path)
    assert out["_rc"] == 3 and "waits in an all-reduce on the pipeline group" in out["_err"], out


def test_functional_all_reduce_on_the_pp_group_is_refused(tmp_path):
    out = prove(ROUND27 / "r27_10_tied_funcol.py", tmp_path)
    assert out["_rc"] == 3 and "on the pipeline group 'pp' is not supported" in out["_err"], out


def test_async_all_reduce_waited_at_once_is_equivalent_or_refused(tmp_path):
    """async_op=True then work.wait() at once: right (EQUIVALENT today); R27-2's fix may refuse
    every async all-reduce (exit 3), which is sound."""
    out = prove(ROUND27 / "r27_09_tied_ar_async_wait.py", tmp_path)
    assert (out["_rc"], out.get("verdict")) in ((0, "EQUIVALENT"), (3, None)), out
