"""CASES2.md, loss scaling and norms: B55, B65, B77 (scaling) and B60, B62 (clipping), with the
class on other sizes and axes.

Class rules: every normaliser is plan data whose product equals the spec's weight per token
(each module of a multi-module plan has its own DP size, B55; the global token count is taken
before accumulation, B65; a class the spec lacks contributes provably nothing, B77); the global
norm sums each gradient once over exactly the ranks that hold disjoint parts of it (B60, B62).
"""

from __future__ import annotations

import numpy as np
import pytest

from proofs.prover import prove
from spec_lang import load
from tests.bugs.cases import (
    BUGS, assert_certified, assert_refuted, goal_values, load_variant,
)


# -- B55: heterogeneous DP -----------------------------------------------------------------------

def test_b55_encoder_gradient_is_llm_dp_over_encoder_dp():
    cx = assert_refuted("B55", goal="grad:W_enc", ratio=0.5)
    assert not any(o == "grad:W_llm" for o in cx.others)


def test_b55_fixed_is_certified(tmp_path):
    assert_certified("B55", tmp_path)


def test_b55_class_encoder_dp_4(tmp_path):
    subs = [("Mesh(dp=2)", "Mesh(dp=4)"), ('Dim("B", 2)', 'Dim("B", 4)')]
    r = prove(load_variant("B55_buggy", tmp_path, subs), timeout_s=60)
    assert r.verdict == "NOT EQUIVALENT" and r.counterexample.ratio == pytest.approx(0.25)
    assert prove(load_variant("B55_fixed", tmp_path, subs), timeout_s=60).verdict == "EQUIVALENT"


# -- B65: per-rank, per-micro-batch means ------------------------------------------------------

def test_b65_mean_of_means_is_refuted_with_uneven_masks():
    cx = assert_refuted("B65", goal="loss")
    assert "not a simple factor" in cx.render()         # values, not a constant factor


def test_b65_equal_counts_hide_it():
    # with every token valid the per-micro-batch means coincide with the global mean
    pr = load(BUGS / "B65_buggy.py")
    s, p = goal_values(pr, "grad:head", inputs={"mask": np.ones((4, 4))})
    assert np.allclose(p.transpose_to(("H", "V")), s.transpose_to(("H", "V")), atol=1e-12)


def test_b65_fixed_is_certified(tmp_path):
    assert_certified("B65", tmp_path)


def test_b65_class_four_ranks_one_microbatch(tmp_path):
    subs = [("Mesh(dp=2)", "Mesh(dp=4)"), ("microbatches(2, B)", "microbatches(1, B)")]
    r = prove(load_variant("B65_buggy", tmp_path, subs), timeout_s=60)
    assert r.verdict == "NOT EQUIVALENT"
    assert prove(load_variant("B65_fixed", tmp_path, subs), timeout_s=60).verdict == "EQUIVALENT"


# -- B77: padded vocabulary ----------------------------------------------------------------------

def test_b77_padded_class_is_refuted():
    cx = assert_refuted("B77", goal="loss")
    assert {"grad:head", "grad:head_pad"} <= set(cx.others)


def test_b77_fixed_is_certified(tmp_path):
    assert_certified("B77", tmp_path)


def test_b77_class_more_padding(tmp_path):
    # V = 5 padded to 8 for tp = 4: three extra classes
    subs = [('Dim("V", 3), Dim("P", 1)', 'Dim("V", 5), Dim("P", 3)'), ("Mesh(tp=2)", "Mesh(tp=4)")]
    r = prove(load_variant("B77_buggy", tmp_path, subs), timeout_s=60)
    assert r.verdict == "NOT EQUIVALENT" and r.counterexample.goal == "loss"
    assert prove(load_variant("B77_fixed", tmp_path, subs), timeout_s=60).verdict == "EQUIVALENT"


# -- B60 / B62: clipping norms -----------------------------------------------------------------

def test_b60_expert_shard_dropped_from_the_norm():
    cx = assert_refuted("B60", goal="grad_norm")
    pr = load(BUGS / "B60_buggy.py")
    s, p = goal_values(pr, "grad_norm", inputs={"a": np.ones(1), "b": np.ones(2)})
    assert float(s.data.reshape(-1)[0]) == pytest.approx(np.sqrt(3), abs=1e-12)
    assert float(p.data.reshape(-1)[0]) == pytest.approx(np.sqrt(2), abs=1e-12)
    assert "not a simple factor" in cx.render()


def test_b60_fixed_is_certified(tmp_path):
    assert_certified("B60", tmp_path)


def test_b62_per_ep_group_norm_is_refuted():
    cx = assert_refuted("B62", goal="grad_norm")
    assert cx.rank == {"ep": 0}


def test_b62_fixed_is_certified(tmp_path):
    assert_certified("B62", tmp_path)


@pytest.mark.parametrize("case", ["B60", "B62"])
def test_norm_class_four_ranks(tmp_path, case):
    subs = [("Mesh(ep=2)", "Mesh(ep=4)"), ('Dim("E", 2)', 'Dim("E", 4)')]
    if case == "B60":
        subs.append(("ops.rank_const(EP, [1, 0])", "ops.rank_const(EP, [1, 0, 0, 0])"))
    else:
        subs.append(('Dim("D", 2)', 'Dim("D", 4)'))
    r = prove(load_variant(f"{case}_buggy", tmp_path, subs), timeout_s=60)
    assert r.verdict == "NOT EQUIVALENT" and r.counterexample.goal == "grad_norm"
    fixed = [x for x in subs if "rank_const" not in x[0]]
    assert prove(load_variant(f"{case}_fixed", tmp_path, fixed), timeout_s=60).verdict == \
        "EQUIVALENT"
