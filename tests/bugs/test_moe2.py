"""CASES2.md, MoE and routing: B42, B52(a), B59(b), B68, and the class on other sizes.

Class rule: every routing quantity a gradient depends on is reduced over the group that holds
its parts (counts read before an in-place reduction, router scores summed over EP), the router
keeps its gradient path through every gather, and a value that is zero in the forward is still
checked in the backward (sentinel slots).
"""

from __future__ import annotations

import numpy as np
import pytest

from proofs.prover import prove
from spec_lang import load
from tests.bugs.cases import (
    BUGS, assert_certified, assert_refuted, goal_values, load_variant,
)


def _ratio(pr, goal, seed=0):
    s, p = goal_values(pr, goal, seed=seed)
    axes = tuple(a for a in p.axes if not a.startswith("@"))
    pv = p.transpose_to(p.rank_axes + axes)
    sv = s.transpose_to(axes)
    return pv / sv


# -- B42: the in-place all-reduce overwrites the local token count -------------------------------

def test_b42_router_aux_gradient_is_refuted():
    cx = assert_refuted("B42", goals_any=("loss", "grad:router"))
    assert "grad:router" in ([cx.goal] + cx.others)
    assert "grad:W_o" not in cx.others                       # the main loss is right


def test_b42_router_gradient_is_group_size_times_the_spec():
    # equal counts on both ranks (no padding): (sum_r n_r) / n_r = 2 on every element
    r = _ratio(load(BUGS / "B42_buggy.py"), "grad:router")
    assert np.allclose(r, 2.0, rtol=0, atol=1e-9), r


def test_b42_fixed_is_certified(tmp_path):
    assert_certified("B42", tmp_path)


@pytest.mark.parametrize("ep,t", [(4, 8), (2, 8)])
def test_b42_class_sizes(tmp_path, ep, t):
    subs = [("Mesh(ep=2)", f"Mesh(ep={ep})"), ('Dim("T", 4)', f'Dim("T", {t})')]
    r = _ratio(load_variant("B42_buggy", tmp_path, subs), "grad:router")
    assert np.allclose(r, ep, rtol=0, atol=1e-9)
    assert prove(load_variant("B42_fixed", tmp_path, subs), timeout_s=60).verdict == "EQUIVALENT"


# -- B52(a): the router detached by a plain all-gather -------------------------------------------

def test_b52_detached_router_gets_no_main_loss_gradient():
    cx = assert_refuted("B52", goal="grad:router", ratio=0.0)
    assert not any(o == "grad:experts" for o in cx.others)


def test_b52_fixed_is_certified(tmp_path):
    assert_certified("B52", tmp_path)


def test_b52_class_four_experts_on_four_ranks(tmp_path):
    subs = [("Mesh(ep=2)", "Mesh(ep=4)"), ('Dim("E", 2)', 'Dim("E", 4)'),
            ('Dim("T", 4)', 'Dim("T", 8)')]
    r = prove(load_variant("B52_buggy", tmp_path, subs), timeout_s=60)
    assert r.verdict == "NOT EQUIVALENT" and r.counterexample.goal == "grad:router"
    assert r.counterexample.ratio == pytest.approx(0.0, abs=1e-12)
    assert prove(load_variant("B52_fixed", tmp_path, subs), timeout_s=60).verdict == "EQUIVALENT"


# -- B59(b): router-score partials never summed --------------------------------------------------

def test_b59_router_score_partials_are_refuted():
    cx = assert_refuted("B59", goals_any=("grad:router", "grad:W_in"))
    assert not any(o == "grad:experts" for o in cx.others)


def test_b59_fixed_is_certified(tmp_path):
    assert_certified("B59", tmp_path)


def test_b59_hook_plus_all_reduce_is_not_refuted(tmp_path):
    # the PR's spelling: identity forward / all-reduce backward on the scores, then the hook
    # that zeroes the non-local slots; right on every input, but sum_r one_hot(r) = 1 is not a
    # rule, so it stays UNKNOWN (the fixed file writes the equal all-gather instead)
    pr = load_variant("B59_buggy", tmp_path, [
        ("    g = scale_grad(g, own)", "    g = scale_grad(copy_to_tp_region(g, EP), own)")])
    r = prove(pr, timeout_s=60)
    assert r.verdict == "UNKNOWN" and r.counterexample is None


def test_b59_class_four_ranks(tmp_path):
    subs = [("Mesh(ep=2)", "Mesh(ep=4)"), ('Dim("E", 2)', 'Dim("E", 4)')]
    r = prove(load_variant("B59_buggy", tmp_path, subs), timeout_s=60)
    assert r.verdict == "NOT EQUIVALENT" and r.counterexample.goal in ("grad:router", "grad:W_in")
    assert prove(load_variant("B59_fixed", tmp_path, subs), timeout_s=60).verdict == "EQUIVALENT"


# -- B68: sentinel slots leak into the router gradient -------------------------------------------

def test_b68_sentinel_slots_are_refuted_in_the_backward_only():
    cx = assert_refuted("B68", goal="grad:router")
    assert "loss" not in cx.others and "grad:experts" not in cx.others


def test_b68_fixed_is_certified(tmp_path):
    assert_certified("B68", tmp_path)


def test_b68_class_more_tokens_and_ranks(tmp_path):
    subs = [("Mesh(ep=2)", "Mesh(ep=4)"), ('Dim("E", 2)', 'Dim("E", 4)'),
            ('Dim("T", 2)', 'Dim("T", 6)')]
    r = prove(load_variant("B68_buggy", tmp_path, subs), timeout_s=60)
    assert r.verdict == "NOT EQUIVALENT" and r.counterexample.goal == "grad:router"
    assert prove(load_variant("B68_fixed", tmp_path, subs), timeout_s=60).verdict == "EQUIVALENT"
