"""Adversarial round 27 (``tests/adversarial/ATTEMPTS.md``, "Round 27"), against the composition
of ``dist.all_reduce`` over the pipeline group in ``prove --torch`` (wip/adv27 at 7853637:
``pp_merge.merge_stages`` composes the k-th ``c10d.allreduce_`` on the pp group of every stage
into one sum / mean / maximum written back in place). Plans in ``plans/round27/`` (r22_16's
tied embedding / head over pp 2 x dp 2, or ``mlp_ddp.py`` for the dp-only ones), so a prove
takes 50-120 s on the shared machine. Truth: ``tests/torch_frontend/pp_truth.py`` (gloo,
float64, one process per rank) and ``tests/adversarial/torch4_truth.py`` (dp only).

Open findings (strict xfail, asserting the right outcome):

* R27-1 (``r27_03``, ``r27_16``, ``r27_17``): an all-reduce of a non-contiguous tensor is
  composed (and lowered, on the dp path too) as the sum of its logical elements; gloo reduces
  ``numel`` elements of raw storage from the data pointer (NCCL refuses the tensor), so a
  column-major buffer on one stage, or a buffer with a row gap, is summed element by element
  with the wrong elements. Truth: r27_03 grad 0.44 / update 0.22, r27_16 see ATTEMPTS,
  r27_17 (dp only) update 0.0057 / 0.0069 (control ``mlp_ddp.py`` 5.6e-17).
* R27-2 (``r27_19``, ``r27_20``): ``async_op=True`` is the schema default of
  ``c10d.allreduce_``, so make_fx leaves it out of the node and ``pp_merge``'s refusal (and the
  dp rule) never see it: an async all-reduce is composed as a synchronous one at its call,
  and a read of the tensor before ``work.wait()`` (or no wait) is proved as if after it.
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


# -- open findings ------------------------------------------------------------------------

@pytest.mark.xfail(strict=True, reason="R27-1: the pp all-reduce ignores memory layout "
                   "(gloo reduces raw storage); EQUIVALENT today")
def test_r27_1_transposed_buffer_on_one_stage_is_not_accepted(tmp_path):
    """The last stage all-reduces through a column-major (v, h) buffer, the first stage the
    row-major gradient: for real a transposed sum (truth grad 0.44, update 0.22)."""
    out = prove(ROUND27 / "r27_03_transposed_buffer.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.xfail(strict=True, reason="R27-1: a buffer with a row gap all-reduced over pp "
                   "is summed by its logical elements; EQUIVALENT today")
def test_r27_1_strided_buffer_over_pp_is_not_accepted(tmp_path):
    out = prove(ROUND27 / "r27_16_pp_strided_buffer.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.xfail(strict=True, reason="R27-1 on the non-pipelined path: a dp all-reduce "
                   "of a buffer with a row gap; EQUIVALENT today")
def test_r27_1_strided_buffer_over_dp_is_not_accepted(tmp_path):
    """mlp_ddp.py through torch.empty_strided(shape, (2 * cols, 1)) buffers (truth update
    0.0057 / 0.0069; control 5.6e-17)."""
    out = prove(ROUND27 / "r27_17_dp_strided_buffer.py", tmp_path)
    assert _not_accepted(out), out
