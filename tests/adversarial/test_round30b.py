"""Adversarial round 30b (``tests/adversarial/ATTEMPTS.md``, "Round 30b"), against twin dims in
``prove --torch`` (wip/sq30, merged at fd59ab5: ``Dims.mark_apart`` keeps the two dims of a
square input apart as twins, ``twin_for`` / ``_dedupe`` name a second occurrence by its twin,
``naming.positional_names`` names the plan's outputs position by position). Plans in
``plans/round30b/``; a prove takes 25-65 s on the shared machine. Truth:
``tests/adversarial/torch4_truth.py FILE 2`` (gloo, float64).

R30b-1 fixed in stop 30 (asserted: UNKNOWN, the op not lowered); R30b-2 and R30b-3 fixed in
stop 31 (asserted: EQUIVALENT), each with wrong mirrors asserted NOT EQUIVALENT. The findings:

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
  without the residual (``r30b_06``) EQUIVALENT. Fixed in stop 31: the bias's gradient (hence
  its Adam moments) carries the twin of the bias's dim, and ``lerp_`` / ``addcmul_`` /
  ``addcdiv_`` and the ``_foreach_*`` updates combined their operands by names; they now name
  them as the output position by position (``Lowering.fit``), as ``add_`` (SGD) did. On the
  weight the names were all there, so nothing refused it and the update added the moment
  *transposed* (main's lowering against torch: 20 of 25 entries wrong,
  ``tests/torch_frontend/test_twin_dims.py``), in the spec and the plan alike.
* R30b-3 (``r30b_11``, ``r30b_16``, tp, false refusal): a residual around
  ``nn.Linear(h, h)`` under ColwiseParallel (output gathered) or RowwiseParallel (input
  replicated): exit 3, "node 119 (EINSUM) is ill-typed: repeated dim in
  ['h', 'h']" (round 23's a19 under TP); without the residual (``r30b_12``) EQUIVALENT. Fixed in
  stop 31: the backward splits the gathered output's gradient (named by the residual's dim,
  ``l0.weight#0``) into the rank's block, so the weight's gradient held the block
  (``l0.weight#0`` over tp) and the whole (``l0.weight#0``) of one spec key, two lineages of
  one IR name ``h``; ``analysis._dedupe`` now names the second by its twin key.
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


def _equivalent(name: str, tmp_path: Path, goals: int) -> None:
    out = prove(ROUND30B / name, tmp_path)
    assert out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT", out.get("_err", out)
    assert out["counts"]["total"] == goals and out["counts"]["open"] == 0, out["counts"]


def _refuted(name: str, tmp_path: Path, goal: str, also: set[str]) -> None:
    """NOT EQUIVALENT, first diverging at ``goal`` and at every goal of ``also`` too."""
    out = prove(ROUND30B / name, tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out.get("_err", out)
    ce = out["counterexample"]
    assert ce["goal"] == goal, ce
    assert also <= set(ce["also_diverging"]), ce["also_diverging"]


def test_r30b_2_square_residual_with_adam_is_equivalent(tmp_path):
    """Fixed in stop 31 (UNKNOWN before): 30 goals (20 s)."""
    _equivalent("r30b_05_square_residual_adam_ddp.py", tmp_path, 30)


def test_r30b_2_square_residual_with_foreach_adam_is_equivalent(tmp_path):
    """``Adam(foreach=True)``: the ``_foreach_*`` updates (51 s)."""
    _equivalent("r30b_20_square_residual_adam_foreach_ddp.py", tmp_path, 30)


def test_r30b_2_mirror_plan_uses_the_square_weight_transposed(tmp_path):
    """``x @ W`` for ``x @ W^T`` in the parallel step: refuted at the first goal (62 s)."""
    _refuted("r30b_17_square_residual_adam_t_plan_ddp_buggy.py", tmp_path, "grad:l1.bias",
             {"grad:sq.weight", "exp_avg:sq.weight", "sq.weight", "sq.bias"})


@pytest.mark.parametrize("name", ["r30b_18_square_residual_adam_grad_t_ddp_buggy.py",
                                  "r30b_21_square_residual_adam_foreach_grad_t_ddp_buggy.py"])
def test_r30b_2_mirror_square_weight_gradient_transposed_before_adam(tmp_path, name):
    """``g^T`` for ``g``: only the twin dims tell them apart (53 s, 44 s)."""
    _refuted(name, tmp_path, "grad:sq.weight",
             {"exp_avg:sq.weight", "exp_avg_sq:sq.weight", "sq.weight"})


def test_r30b_2_mirror_square_bias_gradient_not_all_reduced(tmp_path):
    """The bias's gradient, moments and update follow one rank's half batch (46 s)."""
    _refuted("r30b_19_square_residual_adam_bias_local_ddp_buggy.py", tmp_path,
             "grad:sq.bias", {"exp_avg:sq.bias", "exp_avg_sq:sq.bias", "sq.bias"})


@pytest.mark.parametrize("name", ["r30b_11_tp_square_residual.py",
                                  "r30b_16_tp_row_square_residual.py"])
def test_r30b_3_tp_square_residual_is_equivalent(tmp_path, name):
    """Fixed in stop 31 (exit 3 before): ColwiseParallel with the output gathered, and
    RowwiseParallel with the input replicated, 13 goals (36 s, 53 s)."""
    _equivalent(name, tmp_path, 13)


@pytest.mark.parametrize("name", ["r30b_22_tp_square_residual_t_plan_buggy.py",
                                  "r30b_23_tp_row_square_residual_t_plan_buggy.py"])
def test_r30b_3_mirror_plan_uses_the_sharded_square_weight_transposed(tmp_path, name):
    """Refuted at the loss (36 s, 45 s)."""
    _refuted(name, tmp_path, "loss", {"grad:sq.weight", "sq.weight"})


@pytest.mark.parametrize("name", ["r30b_24_tp_square_residual_grad_t_buggy.py",
                                  "r30b_25_tp_row_square_residual_grad_t_buggy.py"])
def test_r30b_3_mirror_sharded_square_weight_gradient_transposed(tmp_path, name):
    """``g.copy_(g.t())`` on the sharded gradient: the forward agrees, the gradient of the
    block and the whole of one key, which the twin names, does not (65 s, 55 s)."""
    _refuted(name, tmp_path, "grad:sq.weight", {"sq.weight"})


def test_r30b_3_mirror_square_megatron_pair_swapped_is_refused(tmp_path):
    """Rowwise / Colwise swapped on the square pair: torch rejects the shapes (exit 3, 20 s)."""
    out = prove(ROUND30B / "r30b_26_tp_megatron_square_swapped_buggy.py", tmp_path)
    assert out["_rc"] == 3 and "r30b_26_tp_megatron_square_swapped_buggy.py:26:" in out["_err"]


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
