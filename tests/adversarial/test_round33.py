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
  The case ``docs/torch.md`` named as not covered. Truth 0.0030 / 0.0019 (control ``r33_06``
  2.8e-17, EQUIVALENT). Fixed in stop 34 (``real_literals``): UNKNOWN.
* R33-3 (false refusal, predates a48d781; ``r33_02`` dp 2): a hand-written gradient bucket
  (``cat`` of two gradients along dim 0, one ``all_reduce``, ``split`` back, ``copy_``) is
  refused (exit 3) with "traced data: nodes: node 74: dim ?12 is not a dim of the binding" (no
  file:line); the same at 01859fe. Truth 2.8e-17.
* R33-4 (false UNKNOWN, predates a48d781; ``r33_11`` dp 2): a right DDP MLP on (batch, seq,
  hidden) with ``seq`` 1 and one sequence per rank at the real sizes: the loss ``mean``'s
  divisor (1540 at the probe sizes, 4 at the real sizes) is "no product of the model's dims
  and mesh axes"; every goal UNKNOWN. Truth <= 2.8e-17. Fixed in stop 34 (four factors).
"""

from __future__ import annotations

import json
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
def test_r33_2_dp_mean_dim_real_only_is_not_accepted(tmp_path):
    """EQUIVALENT at a48d781 (4 goals, 69 s); truth update 0.0030 / 0.0019. Fixed in stop 34
    (``real_literals.unread_real_literals``): UNKNOWN, ``mean``'s dim named (18 s)."""
    out = _prove("r33_05_mean_dim_real_only.py", tmp_path)
    assert out["_rc"] == 2 and out.get("verdict") == "UNKNOWN", out
    assert "mean" in json.dumps(out) and "at the real sizes" in json.dumps(out), out


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
def test_r33_4_dp_seq1_batch1_right_is_equivalent(tmp_path):
    """Truth <= 2.8e-17: UNKNOWN at a48d781 (74 s) and at 01859fe (73 s): the loss ``mean``'s
    divisor ``|B| |S| |H| / |dp|`` is four factors; ``Traces.lift`` tried three. Fixed in stop
    34 (four): EQUIVALENT (50 s)."""
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


# -- R33-2 at the unit level: a computing op's literal compared at the real sizes -----------------

def _traces(f, probe_shapes, real_shapes):
    import torch
    from torch.fx.experimental.proxy_tensor import make_fx

    from spec_lang.torch_frontend.literals import Traces

    def gm(shapes):
        return make_fx(f, tracing_mode="fake")(*[torch.empty(*s) for s in shapes])
    return Traces(gm(probe_shapes), {}, {}, real=gm(real_shapes))


def _mean_dim_when_square(g):
    d = 1 if g.shape[0] == g.shape[1] else 0
    return g - g.mean(d) + g.mean(0)


def test_r33_2_a_reduction_dim_that_differs_at_the_real_sizes_is_reported():
    from spec_lang.torch_frontend.real_literals import unread_real_literals

    tr = _traces(_mean_dim_when_square, [(6, 10)], [(6, 6)])
    found = unread_real_literals(tr, {})
    assert [(x.target.__name__, why.split(" is ")[1]) for x, why in found] == \
        [("mean.dim", "0 at the probe sizes and 1 at the real sizes, and no rule reads it at "
                      "both")]
    assert "argument 1[0] of mean" in found[0][1]
    # the same program at sizes where the branch does not move: nothing to report
    assert unread_real_literals(_traces(_mean_dim_when_square, [(6, 10)], [(4, 8)]), {}) == []


def test_r33_2_the_same_dim_spelled_negative_at_one_size_is_not_reported():
    from spec_lang.torch_frontend.real_literals import unread_real_literals

    def f(g):
        return g.softmax(-1 if g.shape[0] == g.shape[1] else 1) * 2.0
    assert unread_real_literals(_traces(f, [(6, 10)], [(6, 6)]), {}) == []


def test_r33_2_a_new_tensors_shape_and_a_layer_norm_shape_are_not_reported():
    """Their meaning is the output's named dims, whose real sizes ``solve_real_sizes`` checks."""
    import torch

    from spec_lang.torch_frontend.real_literals import unread_real_literals

    def f(x):
        z = torch.zeros(x.shape[0], x.shape[1]) + torch.full((x.shape[1],), 2.0)
        return torch.nn.functional.layer_norm(x + z, (x.shape[1],))
    assert unread_real_literals(_traces(f, [(6, 10)], [(4, 8)]), {}) == []


def test_r33_2_a_size_literal_is_reported_until_a_rule_reads_it_at_both_sizes():
    from spec_lang.torch_frontend.real_literals import unread_real_literals

    def f(x):
        return x.sum(0) / x.shape[0]
    tr = _traces(f, [(6, 10)], [(4, 8)])
    (x, why), = unread_real_literals(tr, {})
    assert str(x.target) == "aten.div.Tensor", x.target
    assert "is 6 at the probe sizes and 4 at the real sizes" in why
    tr.probe_sizes, tr.real_sizes, tr.axis_sizes = {"B": 6, "H": 10}, {"B": 4, "H": 8}, {}
    div = next(n for n in tr.main.graph.nodes if str(n.target).startswith("aten.div"))
    assert str(tr.scalar(div, 1, div.args[1])) != "6"        # lifted to |B|
    assert unread_real_literals(tr, {}) == []


def test_r33_2_a_node_the_lowering_left_opaque_is_not_reported():
    """Its rule gave no value (an input was not lowered), so every goal reading it is UNKNOWN;
    a node made Opaque only by a later write is checked (R34-2, ``test_round34``)."""
    from spec_lang.torch_frontend.real_literals import unread_real_literals

    tr = _traces(_mean_dim_when_square, [(6, 10)], [(6, 6)])
    (x, _), = unread_real_literals(tr, set())
    assert unread_real_literals(tr, {x}) == []      # Lowering.opaque_when_lowered


# -- R33-3: a dim no rule could name is UNKNOWN per goal, naming the op (was exit 3) -------------

def test_r33_3_goals_with_an_unnamed_dim_are_unknown_naming_the_first_op():
    from types import SimpleNamespace

    from spec_lang.problem import Goal
    from spec_lang.term import DimSpec, Op, term
    from spec_lang.torch_frontend.frontend import _without_unnamed_dims
    from spec_lang.torch_frontend.values import TV

    named = term(Op.INPUT, (), ("w", "param", "real"), (DimSpec("H"),))
    odd = term(Op.INPUT, (), ("g", "param", "real"), (DimSpec("?12"),))
    class Node:                              # an fx node as the env keys it (hashable)
        target = "aten.cat.default"
    node = Node()
    low = SimpleNamespace(unnamed=frozenset({"?12"}), plan_ctx=SimpleNamespace(
        env={"x": TV(named, ((DimSpec("H"),),)), node: TV(odd, ((DimSpec("?12"),),))},
        site=lambda n: "train.py:48"))
    goals = [Goal("w", "param", named, named, "", "train.py:50", None),
             Goal("grad:g", "grad", odd, odd, "", "train.py:48", None)]
    unsupported: list = []
    kept = _without_unnamed_dims(goals, low, unsupported)
    assert [g.name for g in kept] == ["w"]
    assert unsupported == [("grad:g", "aten.cat.default at train.py:48: a dim of its value is no "
                                      "product of the model's named dims (a cat or a reshape "
                                      "across dims of different sizes), so it cannot be sized")]
    low.unnamed = frozenset()               # nothing unnamed: every goal kept, nothing walked
    assert _without_unnamed_dims(goals, low, []) == goals


@pytest.mark.slow
def test_r33_3_gradient_bucket_is_unknown_naming_the_cat_not_an_internal_error(tmp_path):
    """Stop 34: UNKNOWN (54 s), each goal naming ``aten.cat.default`` at line 48; exit 3 with
    "dim ?12 is not a dim of the binding" before. Still a false refusal (the xfail above)."""
    out = _prove("r33_02_cat_order_right.py", tmp_path)
    assert out["_rc"] == 2 and out.get("verdict") == "UNKNOWN", out
    assert "r33_02_cat_order_right.py:48" in json.dumps(out), out
