"""CASES2.md, DTensor sharding rules (B69, B71, B72, B73) and tied weights across pipeline
stages with flat-buffer index maps (B63, B64), with the class on other sizes.

DSL forms: a DTensor-rule bug is a plan whose declared placement disagrees with the data. The
plan states what each rank really holds (``views.dtensor_view`` builds the relabelled view from
the global tensor; ``local_map``'s per-rank global length is plan data; the backward of a
gather is the declared region), and the proof compares it with the spec, never with the label.
The PyTorch front end (issue 11) will capture the same programs from ``torch.distributed.tensor``
code; these files are their DSL forms.
"""

from __future__ import annotations

import numpy as np
import pytest

from proofs.prover import prove
from spec_lang import Dim, load
from spec_lang.tensor import TraceContext, tracing, Tensor
from spec_lang.spec import input_term
from spec_lang.term import Binding
from tests.bugs.cases import (
    BUGS, assert_certified, assert_refuted, goal_values, load_variant,
)


# -- B69: view relabelled without redistribution -------------------------------------------------

def test_b69_relabelled_view_is_refuted():
    cx = assert_refuted("B69", goals_any=("loss", "grad:w"))
    assert "grad:w" in [cx.goal] + cx.others


def test_b69_fixed_is_certified(tmp_path):
    assert_certified("B69", tmp_path)


def test_b69_the_plan_holds_the_local_blocks():
    # rank r's rows of the relabelled view are columns 2r, 2r+1 of every row of x
    pr = load(BUGS / "B69_buggy.py")
    x = np.arange(16.0).reshape(4, 4)
    s, p = goal_values(pr, "grad:w", inputs={"x": x})
    want = s.transpose_to(("@tp", "R2", "C2"))            # rank r: rows 4r..4r+3 of the view
    assert np.array_equal(want.reshape(8, 2), x.reshape(8, 2))
    got = p.transpose_to(("@tp", "R2", "C2"))
    assert np.array_equal(got[0], x[:, 0:2]) and np.array_equal(got[1], x[:, 2:4])


@pytest.mark.parametrize("r,c,r2,c2,tp", [(4, 8, 16, 2, 2), (6, 4, 12, 2, 2), (2, 8, 8, 2, 4)])
def test_b69_class_sizes(tmp_path, r, c, r2, c2, tp):
    subs = [('R, C, R2, C2 = Dim("R", 4), Dim("C", 4), Dim("R2", 8), Dim("C2", 2)',
             f'R, C, R2, C2 = Dim("R", {r}), Dim("C", {c}), Dim("R2", {r2}), Dim("C2", {c2})'),
            ("Mesh(tp=2)", f"Mesh(tp={tp})")]
    bad = prove(load_variant("B69_buggy", tmp_path, subs), timeout_s=60)
    assert bad.verdict == "NOT EQUIVALENT"
    assert prove(load_variant("B69_fixed", tmp_path, subs), timeout_s=60).verdict == "EQUIVALENT"


def test_view_is_numpy_reshape():
    from spec_lang.evaluate import evaluate
    from spec_lang.views import view
    R, C, R2, C2 = Dim("R", 3), Dim("C", 6), Dim("R2", 9), Dim("C2", 2)
    ctx = TraceContext("spec")
    with tracing(ctx):
        x = Tensor(input_term("x", "data", "real", (R, C)))
        y = view(x, (R, C), (R2, C2))
    val = np.random.default_rng(0).standard_normal((3, 6))
    out = evaluate([y.term], Binding(dict(ctx.sizes)), {"x": val})[y.term]
    assert np.array_equal(out.transpose_to(("R2", "C2")), val.reshape(9, 2))


# -- B71: local_map with uneven shards -----------------------------------------------------------

def test_b71_rank_dependent_global_length_is_refuted():
    assert_refuted("B71", goals_any=("loss", "grad:w"))


def test_b71_fixed_is_certified(tmp_path):
    assert_certified("B71", tmp_path)


def test_b71_class_four_ranks(tmp_path):
    subs = [("Mesh(tp=2)", "Mesh(tp=4)"), ('Dim("X", 6), Dim("XK", 6)', 'Dim("X", 8), Dim("XK", 8)')]
    assert prove(load_variant("B71_buggy", tmp_path, subs), timeout_s=60).verdict == \
        "NOT EQUIVALENT"
    assert prove(load_variant("B71_fixed", tmp_path, subs), timeout_s=60).verdict == "EQUIVALENT"


# -- B72: backward placement defaults to Replicate -----------------------------------------------

def test_b72_slice_backward_of_a_partial_gradient_is_refuted():
    cx = assert_refuted("B72", goal="grad:W_in")
    assert "grad:experts" not in cx.others


def test_b72_fixed_is_certified(tmp_path):
    assert_certified("B72", tmp_path)


def test_b72_class_four_ranks(tmp_path):
    subs = [("Mesh(ep=2)", "Mesh(ep=4)"), ('Dim("E", 2)', 'Dim("E", 4)'), ('Dim("T", 4)', 'Dim("T", 8)')]
    r = prove(load_variant("B72_buggy", tmp_path, subs), timeout_s=60)
    assert r.verdict == "NOT EQUIVALENT" and r.counterexample.goal == "grad:W_in"
    assert prove(load_variant("B72_fixed", tmp_path, subs), timeout_s=60).verdict == "EQUIVALENT"


# -- B73: non-linear reductions of a Partial -----------------------------------------------------

def test_b73_max_of_partial_addends_is_refuted_with_the_reported_numbers():
    assert_refuted("B73", goal="loss")
    pr = load(BUGS / "B73_buggy.py")
    # addends [1, 3] and [2, 0]; w = 0: spec max = 3, plan 3 + 2 = 5
    from spec_lang.evaluate import evaluate
    g = next(x for x in pr.goals if x.name == "loss")
    # a Partial input's addends are drawn by the evaluator: give them through the rng hook
    vals = evaluate([g.expected, g.actual], pr.binding,
                    {"w": np.zeros(2), "v": np.array([3.0, 3.0])},
                    rng=np.random.default_rng(0))
    assert float(vals[g.expected].data.reshape(-1)[0]) == pytest.approx(3.0)


def test_b73_fixed_is_certified(tmp_path):
    assert_certified("B73", tmp_path)


@pytest.mark.parametrize("op", ["min", "norm"])
def test_b73_class_min_and_norm(tmp_path, op):
    stat = {"min": "-ops.max(-{v}, N)", "norm": "ops.sqrt(ops.sum({v} * {v}))"}[op]
    subs_spec = ('forward=lambda p, d: ops.sum(p["w"] * d["v"]) + ops.stop_gradient(ops.max(d["v"], N)),',
                 'forward=lambda p, d: ops.sum(p["w"] * d["v"]) + ops.stop_gradient('
                 + stat.format(v='d["v"]') + '),')
    bad = [subs_spec, ('stat = ops.stop_gradient(ops.max(d["v"], N))',
                       'stat = ops.stop_gradient(' + stat.format(v='d["v"]') + ')')]
    good = [subs_spec, ('stat = ops.stop_gradient(ops.max(all_reduce(d["v"], TP), N))',
                        'stat = ops.stop_gradient(' + stat.format(v='all_reduce(d["v"], TP)') + ')')]
    r = prove(load_variant("B73_buggy", tmp_path, bad), timeout_s=60)
    assert r.verdict == "NOT EQUIVALENT" and r.counterexample.goal == "loss"
    assert prove(load_variant("B73_fixed", tmp_path, good), timeout_s=60).verdict == "EQUIVALENT"


# -- B63 / B64: tied weights across pipeline stages ----------------------------------------------

def test_b63_mismatched_flat_offsets_are_refuted():
    cx = assert_refuted("B63", goal="grad:E")
    assert not any(o in ("grad:W_1", "grad:W_2") for o in cx.others)


def test_b63_fixed_is_certified(tmp_path):
    assert_certified("B63", tmp_path)


def test_b63_class_other_offsets(tmp_path):
    # E after W_1 on stage 0 and first on stage 1: still different owners of equal indices
    subs = [('FlatBuffer({"E": (V, H), "W_1": (H, K)}, DP, 2, pad=48)',
             'FlatBuffer({"W_1": (H, K), "E": (V, H)}, DP, 2, pad=48)'),
            ('FlatBuffer({"W_2": (K, H), "E": (V, H)}, DP, 2)',
             'FlatBuffer({"E": (V, H), "W_2": (K, H)}, DP, 2)')]
    r = prove(load_variant("B63_buggy", tmp_path, subs), timeout_s=60)
    assert r.verdict == "NOT EQUIVALENT" and r.counterexample.goal == "grad:E"


def test_b64_unsynchronised_tied_copies_are_refuted():
    cx = assert_refuted("B64", goal="grad:E")
    assert cx.schedule is not None and "grad:W" not in cx.others


def test_b64_fixed_is_certified(tmp_path):
    assert_certified("B64", tmp_path)


def test_b64_class_four_stages(tmp_path):
    # E on the first and the last of four stages (1F1B)
    subs = [("from spec_lang.schedules import gpipe",
             "from spec_lang.schedules import one_f_one_b"),
            ('pipe = Pipeline([stage(first, ["E", "W"]), stage(last, ["E"])],\n'
             '                schedule=gpipe(pp=2, microbatches=1))',
             'def relay(p, d, io):\n    io.send(io.recv())\n\n\n'
             'pipe = Pipeline([stage(first, ["E", "W"]), stage(relay, []), stage(relay, []), '
             'stage(last, ["E"])],\n                schedule=one_f_one_b(pp=4, microbatches=1))'),
            ("Mesh(pp=2), forward=pipe.forward, schedule=pipe",
             "Mesh(pp=4), forward=pipe.forward, schedule=pipe")]
    r = prove(load_variant("B64_buggy", tmp_path, subs), timeout_s=60)
    assert r.verdict == "NOT EQUIVALENT" and r.counterexample.goal == "grad:E"
    assert prove(load_variant("B64_fixed", tmp_path, subs), timeout_s=60).verdict == "EQUIVALENT"
