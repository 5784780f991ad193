"""Adversarial round 30b (``tests/adversarial/ATTEMPTS.md``, "Round 30b"), against twin dims in
``prove --torch`` (wip/sq30, merged at fd59ab5: ``Dims.mark_apart`` keeps the two dims of a
square input apart as twins, ``twin_for`` / ``_dedupe`` name a second occurrence by its twin,
``naming.positional_names`` names the plan's outputs position by position). Plans in
``plans/round30b/``; a prove takes 25-65 s on the shared machine. Truth:
``tests/adversarial/torch4_truth.py FILE 2`` (gloo, float64).

R30b-1 fixed in stop 30 (asserted: UNKNOWN, the op not lowered). Open, strict xfail
(asserting the right outcome): R30b-2, R30b-3. The findings:

* R30b-1 (``r30b_01``, ``r30b_02``, dp, false accept): ``e.t() + m`` with ``e`` an ``expand``
  of a vector to [h, h] and ``m`` a square input (``m.sum(0).expand(h, h).t() + m``) is lowered
  as ``e + m``: the expand's new dim is unified with the twin class the same layout already
  holds (the twins themselves are kept apart, so nothing merges the whole), the layout then
  holds one class twice and ``Lowering.fit`` renames the broadcast sums by the wrong position.
  A plan that drops the ``.t()`` gets the same IR: EQUIVALENT, truth update up to 0.23 (the
  ``check_fn`` case below shows the lowering alone against torch). Also ``e.t() * m``,
  ``e.t() - m``, ``e.t().contiguous() + m``; ``m + e.t()`` is right.
* R30b-2 (``r30b_05``, dp, false refusal): a residual around ``nn.Linear(h, h)`` with Adam:
  UNKNOWN (``aten.addcdiv_`` of ``sq.bias``: "the value has dims ['h'] its layout does not");
  without the residual (``r30b_06``) EQUIVALENT.
* R30b-3 (``r30b_11``, ``r30b_16``, tp, false refusal): a residual around
  ``nn.Linear(h, h)`` under ColwiseParallel (output gathered) or RowwiseParallel (input
  replicated): exit 3, "node 119 (EINSUM) is ill-typed: repeated dim in
  ['h', 'h']" (round 23's a19 under TP); without the residual (``r30b_12``) EQUIVALENT.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.adversarial.torch_prove import prove

ROUND30B = Path(__file__).resolve().parent / "plans" / "round30b"

pytestmark = pytest.mark.slow


def _not_accepted(out: dict) -> bool:
    """Anything but EQUIVALENT: NOT EQUIVALENT, UNKNOWN or a refusal (exit 3)."""
    return out["_rc"] != 0 and out.get("verdict") != "EQUIVALENT"


def test_r30b_1_expand_t_plus_square_input_is_not_lowered():
    """The lowering alone (no prove): fixed in stop 30, a layout holding one named dim at two
    positions is not lowered (``Lowering.fit``: UNKNOWN) rather than renamed by the wrong
    position; ``m + e.t()``, which was right, is not lowered either (conservative)."""
    import torch

    from tests.torch_frontend.harness import check_fn

    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        m = torch.randn(5, 5, generator=torch.Generator().manual_seed(0))
        for f in (lambda m: m.sum(0).expand(5, 5).t() + m,
                  lambda m: m + m.sum(0).expand(5, 5).t()):
            with pytest.raises(AssertionError, match="holds one named dim twice"):
                check_fn(f, m)
    finally:
        torch.set_default_dtype(old)


def test_r30b_1_expand_t_dropped_on_a_square_buffer_is_not_accepted(tmp_path):
    """Fixed in stop 30: UNKNOWN, the add not lowered (20 s)."""
    out = prove(ROUND30B / "r30b_01_expand_t_buffer_ddp.py", tmp_path)
    assert _not_accepted(out) and out.get("verdict") == "UNKNOWN", out


def test_r30b_1_expand_t_dropped_on_a_square_parameter_is_not_accepted(tmp_path):
    """Fixed in stop 30: UNKNOWN, the add not lowered (21 s)."""
    out = prove(ROUND30B / "r30b_02_expand_t_param_ddp.py", tmp_path)
    assert _not_accepted(out) and out.get("verdict") == "UNKNOWN", out


@pytest.mark.xfail(strict=True, reason="R30b-2: Adam on a square layer in a residual: "
                   "addcdiv_ of its bias not lowered (UNKNOWN)")
def test_r30b_2_square_residual_with_adam_is_equivalent(tmp_path):
    out = prove(ROUND30B / "r30b_05_square_residual_adam_ddp.py", tmp_path)
    assert out["_rc"] == 0 and out["verdict"] == "EQUIVALENT", out.get("open", out)


@pytest.mark.xfail(strict=True, reason="R30b-3: TP ColwiseParallel on a square layer in a "
                   "residual: an ill-typed EINSUM (repeated dim h), exit 3")
def test_r30b_3_tp_square_residual_is_equivalent(tmp_path):
    out = prove(ROUND30B / "r30b_11_tp_square_residual.py", tmp_path)
    assert out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT", out.get("_err", out)


@pytest.mark.xfail(strict=True, reason="R30b-3: TP RowwiseParallel on a square layer in a "
                   "residual: an ill-typed EINSUM (repeated dim h), exit 3")
def test_r30b_3_tp_rowwise_square_residual_is_equivalent(tmp_path):
    out = prove(ROUND30B / "r30b_16_tp_row_square_residual.py", tmp_path)
    assert out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT", out.get("_err", out)


def test_r30b_controls(tmp_path):
    """Right files accepted, wrong ones not (twin dims doing their job)."""
    for name, ok in (("r30b_06_square_nores_adam_ddp.py", True),
                     ("r30b_07_matmul_twice_ddp.py", True),
                     ("r30b_10_fsdp_square_control.py", True),
                     ("r30b_12_tp_square_nores.py", True),
                     ("r30b_13_tp_megatron_square_residual.py", True),
                     ("r30b_08_matmul_twice_t_ddp_buggy.py", False),
                     ("r30b_09_two_square_swapped_ddp_buggy.py", False)):
        out = prove(ROUND30B / name, tmp_path)
        if ok:
            assert out["_rc"] == 0 and out["verdict"] == "EQUIVALENT", (name, out.get("open"))
        else:
            assert out.get("verdict") == "NOT EQUIVALENT", (name, out.get("open"))
