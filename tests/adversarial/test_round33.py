"""Adversarial round 33 (``tests/adversarial/ATTEMPTS.md``, "Round 33"), against wip/adv33 at
a48d781 (= main: stop 33's fix of R24-1: ``analysis.align_sizes`` aligns the zero coordinate's
probe and real-size traces node by node, ``real_moves.check_real_moves`` compares twin moves by
meaning and loose chains by strided layout). Plans in ``plans/round33/``. Truth:
``tests/adversarial/torch4_truth.py FILE 2`` (dp), ``tests/torch_frontend/pp_truth.py FILE``
(pipelining); gloo, float64.

* R33-1 (false accept; ``r33_03`` dp 2): twin moves are compared by ``move_meaning`` only, never
  by what they read. At the real sizes (square gradients) the step takes ``g.t()`` twice where
  the probe trace takes ``g.t()`` and then ``a.t()``: the same targets in the same order, so
  ``align_sizes`` pairs them, their meanings agree, the consumer's argument is a twin and
  ``_check_refs`` (``_sources``: the set of computing nodes a chain reads) sees ``{g}`` on both
  sides. Truth 0.0146 / 0.0060 (control ``r33_04`` 2.8e-17, EQUIVALENT). The same on the
  pipelined path (``r33_10`` pp 2 x dp 2): truth sq.weight grad 0.072, EQUIVALENT.
* R33-2 (false accept; ``r33_05`` dp 2): a computing op's literal read from the graph by its
  rule (``mean``'s dim: ``rules_contract.Sum.dims`` / ``Mean.term`` read ``n.args[1]``), not
  through ``Traces.scalar``: ``g - g.mean(d) + g.mean(0)`` with ``d`` 1 at the real sizes only.
  The case ``docs/torch.md`` names as not covered. Truth 0.0030 / 0.0019 (control ``r33_06``
  2.8e-17, EQUIVALENT).
* R33-3 (false refusal, predates a48d781; ``r33_02`` dp 2): a hand-written gradient bucket
  (``cat`` of two gradients along dim 0, one ``all_reduce``, ``split`` back, ``copy_``) is
  refused (exit 3) with "traced data: nodes: node 74: dim ?12 is not a dim of the binding" (no
  file:line); the same at 01859fe. Truth 2.8e-17.
* R33-4 (false UNKNOWN, predates a48d781; ``r33_11`` dp 2): a right DDP MLP on (batch, seq,
  hidden) with ``seq`` 1 and one sequence per rank at the real sizes: the loss ``mean``'s
  divisor (1540 at the probe sizes, 4 at the real sizes) is "no product of the model's dims
  and mesh axes"; every goal UNKNOWN. Truth <= 2.8e-17.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND33 = Path(__file__).resolve().parent / "plans" / "round33"


def _not_accepted(out: dict) -> bool:
    """Anything but EQUIVALENT (NOT EQUIVALENT, UNKNOWN or a refusal)."""
    return out["_rc"] != 0 and out.get("verdict") != "EQUIVALENT"


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND33 / name, tmp_path)


# -- findings (strict xfail: the right outcome asserted) ---------------------------------------

@pytest.mark.slow
def test_r33_1_dp_t_rewired_real_only_is_not_accepted(tmp_path):
    """EQUIVALENT at a48d781 (4 goals, 70 s); truth update 0.0146 / 0.0060. Fixed at b0c1650
    (an aligned move reads its twin's inputs): exit 3 naming ``t_10`` (16 s)."""
    out = _prove("r33_03_t_rewired_real_only.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r33_1_control_t_t_is_equivalent(tmp_path):
    """r33_03's control (``g.t().t()`` at every size, truth 2.8e-17): EQUIVALENT (71 s)."""
    out = _prove("r33_04_t_rewired_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
def test_r33_1_pp_t_rewired_real_only_is_not_accepted(tmp_path):
    """EQUIVALENT at a48d781 (12 goals, 195 s); truth sq.weight grad 0.072, param 0.036. Fixed
    at b0c1650: exit 3 naming ``t_33`` (83 s)."""
    out = _prove("r33_10_pp_t_rewired_real_only.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R33-2: a computing op's literal its rule reads from the "
                   "graph (mean's dim) is not compared at the real sizes (docs/torch.md: not "
                   "covered)")
def test_r33_2_dp_mean_dim_real_only_is_not_accepted(tmp_path):
    """EQUIVALENT at a48d781 (4 goals, 69 s); truth update 0.0030 / 0.0019."""
    out = _prove("r33_05_mean_dim_real_only.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r33_2_control_mean_dim_right_is_equivalent(tmp_path):
    """r33_05's control (``mean(0)`` at every size, truth 2.8e-17): EQUIVALENT (73 s)."""
    out = _prove("r33_06_mean_dim_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R33-3: a hand-written gradient bucket (cat of two "
                   "gradients, all_reduce, split back) is refused: 'dim ?12 is not a dim of the "
                   "binding' (predates a48d781)")
def test_r33_3_dp_gradient_bucket_right_is_equivalent(tmp_path):
    """Truth 2.8e-17: exit 3 at a48d781 (84 s) and at 01859fe (104 s)."""
    out = _prove("r33_02_cat_order_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
def test_r33_bucket_swapped_real_only_is_not_accepted(tmp_path):
    """r33_02 with the bucket's pieces swapped at the real sizes (truth 0.0277): exit 3 at
    a48d781 (70 s, R33-3's reason). Stays asserted once R33-3 is fixed: the swap is R33-1's
    mechanism through a ``cat`` (``_sources`` is a set)."""
    out = _prove("r33_01_cat_order_real_only.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r33_cat_halves_swapped_real_only_is_not_accepted(tmp_path):
    """Each gradient's halves swapped at the real sizes (truth 0.0122): exit 3 at a48d781
    (79 s, a lowering refusal of ``cat(g.chunk(2))``)."""
    out = _prove("r33_07_cat_halves_swapped_real_only.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R33-4: a mean's divisor over dims of real size 1 is "
                   "'no product of the model's dims' (predates a48d781)")
def test_r33_4_dp_seq1_batch1_right_is_equivalent(tmp_path):
    """Truth <= 2.8e-17: UNKNOWN at a48d781 (74 s) and at 01859fe (73 s)."""
    out = _prove("r33_11_seq1_contiguous_right.py", tmp_path)
    assert _equivalent(out), out


# -- sound outcomes kept asserted -------------------------------------------------------------

@pytest.mark.slow
def test_r33_pp_t_real_only_is_not_accepted(tmp_path):
    """R24-1 on the pipelined path (``sq.weight``'s gradient transposed when ``h`` is 16, the
    real size; truth sq.weight grad 0.072): refused at a48d781 (exit 3, 164 s: "argument 1 of
    copy_ ... is moved differently at the real sizes")."""
    out = _prove("r33_09_pp_t_real_only.py", tmp_path)
    assert _not_accepted(out), out
