"""CASES2.md, optimizer semantics: B45, B46, B48, B50, B52(b), and the class on other plans.

Class rule: the parameter *after the step* equals the spec's, with the optimizer state (moments,
step counters, group membership, ownership of sharded slices) part of the iteration. The cases at
their smallest configuration, then mutants of our own on the debug Llama under the plan library
(Megatron TP, ZeRO) and on other sizes: each mutant must be refuted (0 false accepts), each
unmutated plan proved.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import numpy as np
import pytest

from proofs.prover import prove
from spec_lang import AdamW, SGD, build_problem, load
from spec_lang.models import DEBUG, llama
from spec_lang.muon import Muon
from spec_lang.optim import InitStep, ParamGroups
from spec_lang.plans import megatron, zero1
from tests.bugs.cases import (
    BUGS, assert_certified, assert_refuted, goal_values, load_variant, prove_case,
)

DEBUG1 = dataclasses.replace(DEBUG, n_layers=1)
MLP = ("mlp.w1", "mlp.w2", "mlp.w3")


def _prove(spec, plan):
    return prove(build_problem(spec, plan), timeout_s=120)


# -- B46: Adam's step counter advanced by the pre-initialisation step --------------------------

def test_b46_synthetic_init_step_is_refuted_at_the_counter():
    cx = assert_refuted("B46", goal="step:w", ratio=2.0)
    assert "w" in cx.others


def test_b46_first_update_is_0_744_of_the_spec():
    pr = load(BUGS / "B46_buggy.py")
    s, p = goal_values(pr, "w", seed=3)
    w0 = np.random.default_rng(3)       # the same draw: recover the initial weight
    from spec_lang.evaluate import sample_inputs
    g = next(x for x in pr.goals if x.name == "w")
    w = sample_inputs([g.expected, g.actual], pr.binding, w0)["w"]
    ratio = (p.transpose_to(("H", "O")) - w) / (s.transpose_to(("H", "O")) - w)
    b1, b2 = 0.9, 0.999
    assert np.allclose(ratio, math.sqrt(1 + b2) / (1 + b1), rtol=0, atol=1e-6), ratio


def test_b46_fixed_is_certified(tmp_path):
    assert_certified("B46", tmp_path)


def test_b46_class_counter_reset_but_live_weight_decay_is_refuted(tmp_path):
    # the PR's reset of the counter alone is not the fix: with AdamW's weight decay the live
    # synthetic step still moves the weights (and the forward then reads them)
    pr = load_variant("B46_fixed", tmp_path, [
        ("from spec_lang.optim import Adam, InitStep", "from spec_lang.optim import AdamW as Adam, InitStep"),
        ("InitStep(lr=0, weight_decay=0, reset_step=True,", "InitStep(reset_step=True,")])
    r = prove(pr, timeout_s=60)
    assert r.verdict == "NOT EQUIVALENT"
    assert r.counterexample.goal == "loss"              # the forward reads the moved weights


def test_b46_class_coupled_weight_decay_feeds_the_moments(tmp_path):
    # Adam with coupled weight decay: the synthetic step puts wd * w into the moments
    pr = load_variant("B46_fixed", tmp_path, [
        ("eps=Fraction(1, 10**8), fresh=True)", "eps=Fraction(1, 10**8), fresh=True, "
                                                "weight_decay=Fraction(1, 10))"),
        ("InitStep(lr=0, weight_decay=0, reset_step=True,", "InitStep(lr=0, reset_step=True,")])
    r = prove(pr, timeout_s=60)
    assert r.verdict == "NOT EQUIVALENT"
    assert r.counterexample.goal.startswith("exp_avg")


def test_b46_class_on_the_debug_llama_under_zero1():
    m = llama(DEBUG1)
    spec = m.spec(AdamW(fresh=True))
    ok = zero1(m, dp=2)
    assert _prove(spec, dataclasses.replace(
        ok, optimizer_init=(InitStep(lr=0, weight_decay=0, reset_step=True),))).verdict == \
        "EQUIVALENT"
    r = _prove(spec, dataclasses.replace(ok, optimizer_init=(InitStep(lr=0, weight_decay=0),)))
    assert r.verdict == "NOT EQUIVALENT" and r.counterexample.goal.startswith("step:")
    assert r.counterexample.ratio == pytest.approx(2.0)


# -- parameter groups ----------------------------------------------------------------------------

def _decay_groups(no_decay):
    return ParamGroups([(lambda n: n.endswith(no_decay), AdamW(weight_decay=0)),
                        (lambda n: not n.endswith(no_decay), AdamW(weight_decay=Fraction(1, 10)))])


def test_param_groups_membership_is_part_of_the_proof():
    m = llama(DEBUG1)
    norms = ("attention_norm", "ffn_norm", "norm")
    spec = m.spec(_decay_groups(norms))
    plan = megatron(m, tp=2, dp=1, microbatches=1)
    assert _prove(spec, plan).verdict == "EQUIVALENT"        # the spec's groups by default
    # mutant: the plan's groups forget the final norm (decayed like a matrix)
    bad = dataclasses.replace(plan, optimizer=_decay_groups(("attention_norm", "ffn_norm")))
    r = _prove(spec, bad)
    assert r.verdict == "NOT EQUIVALENT" and r.counterexample.goal == "norm"


def test_param_groups_reject_a_parameter_in_no_group_or_two():
    from spec_lang.errors import SpecError
    from spec_lang import Dim, Spec, ops, real
    H = Dim("H", 2)
    for groups in ([(["w"], SGD()), (["w"], SGD())], [(["v"], SGD())]):
        spec = Spec(params={"w": (H,)}, data={"x": real(H)},
                    forward=lambda p, d: ops.sum(p["w"] * d["x"]), optimizer=ParamGroups(groups))
        with pytest.raises(SpecError, match="exactly one group"):
            from spec_lang import trace_spec
            trace_spec(spec)


# -- B45: sharded optimizer ownership ------------------------------------------------------------

def test_b45_trailing_shards_without_owner_are_refuted():
    cx = assert_refuted("B45", goals_any=("w2", "w3"))
    assert not any(o.startswith("grad:") for o in cx.others)   # every gradient is right


def test_b45_fixed_is_certified(tmp_path):
    assert_certified("B45", tmp_path)


def test_b45_class_layerwise_owner_without_the_reduced_gradient(tmp_path):
    # B45 case 2 (LayerWise): whole parameters go round-robin to the ranks, but the gradients
    # were reduce-scattered by the bucket layout: w1's owner (rank 1) does not hold its reduced
    # gradient and steps with its own partial one
    pr = load_variant("B45_fixed", tmp_path, [
        ("from spec_lang.plans.sharded_dp import FlatBuffer",
         "from spec_lang.plans.sharded_dp import FlatBuffer\nfrom spec_lang.ownership import Ownership"),
        ("reduce_grads=lambda name, g: all_reduce(all_reduce(g, DPR), DPS),",
         "reduce_grads=lambda name, g: bucket.after_reduce_scatter(name, all_reduce(g, DPR), 'sum'),"),
        ("optimizer_owners={n: bucket.ownership(n) for n in NAMES})",
         "optimizer_owners={n: Ownership(DPS, K, [i % 2]) for i, n in enumerate(NAMES)})")])
    r = prove(pr, timeout_s=60)
    assert r.verdict == "NOT EQUIVALENT" and r.counterexample.goal in ("grad:w1", "grad:w2")


def test_b45_class_owner_swap_with_full_gradients_is_equivalent(tmp_path):
    # who owns a block does not matter when every rank holds the fully reduced gradient
    pr = load_variant("B45_fixed", tmp_path, [
        ("from spec_lang.plans.sharded_dp import FlatBuffer",
         "from spec_lang.plans.sharded_dp import FlatBuffer\nfrom spec_lang.ownership import Ownership"),
        ("optimizer_owners={n: bucket.ownership(n) for n in NAMES})",
         "optimizer_owners={n: Ownership(DPS, K, [1 - i // 2]) for i, n in enumerate(NAMES)})")])
    assert prove(pr, timeout_s=60).verdict == "EQUIVALENT"


def test_ownership_checks_its_ranks(tmp_path):
    from spec_lang.errors import PlanError
    with pytest.raises(PlanError, match="names ranks \\[2\\]"):
        load_variant("B45_fixed", tmp_path, [
            ("from spec_lang.plans.sharded_dp import FlatBuffer",
             "from spec_lang.plans.sharded_dp import FlatBuffer\n"
             "from spec_lang.ownership import Ownership"),
            ("optimizer_owners={n: bucket.ownership(n) for n in NAMES})",
             "optimizer_owners={n: Ownership(DPS, K, [2]) for n in NAMES})")])


# -- Muon: B48 (ZeRO), B50 (TP) ------------------------------------------------------------------

def test_b48_partly_reduced_matrix_is_refuted():
    cx = assert_refuted("B48", goal="W")
    assert cx.ratio is None and not any(o.startswith("grad:") for o in cx.others)


def test_b48_fixed_is_certified(tmp_path):
    assert_certified("B48", tmp_path)


def test_b50_blockwise_newton_schulz_is_refuted():
    cx = assert_refuted("B50", goal="W")
    assert cx.ratio is None and cx.rank == {"tp": 0}


def test_b50_fixed_is_certified(tmp_path):
    assert_certified("B50", tmp_path)


def test_b50_distributed_mode_is_certified(tmp_path):
    pr = load_variant("B50_fixed", tmp_path, [('Muon(tp_mode="duplicated")',
                                                'Muon(tp_mode="distributed")')])
    assert prove(pr, timeout_s=60).verdict == "EQUIVALENT"


@pytest.mark.parametrize("tp,f", [(2, 8), (4, 8)])
def test_b50_class_sizes(tmp_path, tp, f):
    subs = [('Dim("F", 4)', f'Dim("F", {f})'), ("Mesh(tp=2)", f"Mesh(tp={tp})")]
    assert prove(load_variant("B50_fixed", tmp_path, subs), timeout_s=60).verdict == "EQUIVALENT"
    r = prove(load_variant("B50_buggy", tmp_path, subs), timeout_s=60)
    assert r.verdict == "NOT EQUIVALENT" and r.counterexample.goal == "W"


def _muon_groups(mode):
    return ParamGroups([(lambda n: n.endswith(MLP), Muon(tp_mode=mode)),
                        (lambda n: not n.endswith(MLP), AdamW())])


@pytest.mark.parametrize("mode,verdict", [("duplicated", "EQUIVALENT"),
                                          ("distributed", "EQUIVALENT"),
                                          ("blockwise", "NOT EQUIVALENT")])
def test_muon_class_on_the_debug_llama_under_megatron_tp(mode, verdict):
    m = llama(DEBUG1)
    spec = m.spec(_muon_groups("duplicated"))
    plan = dataclasses.replace(megatron(m, tp=2, dp=1, microbatches=1),
                               optimizer=_muon_groups(mode))
    r = _prove(spec, plan)
    assert r.verdict == verdict
    if verdict != "EQUIVALENT":
        assert r.counterexample.goal.endswith(MLP)


def test_muon_class_zero_sharded_orthogonalisation(tmp_path):
    # ZeRO-1 with the optimizer state Shard(F) over dp: blockwise NS orthogonalises each dp
    # shard (wrong); duplicated gathers the update over dp first (right)
    base = [("from spec_lang.plans.sharded_dp import FlatBuffer",
             "from spec_lang import Shard, all_gather\nfrom spec_lang.plans.sharded_dp import FlatBuffer, owned_block"),
            ("            optimizer_owners={\"W\": bucket.ownership(\"W\")})",
             "            optimizer_placements={\"W\": {DP: Shard(F)}}, optimizer=MUON_PLAN,\n"
             "            gather_params=lambda name, new: all_gather(new, DP, F))"),
            ("reduce_grads=lambda name, g: all_reduce(g, DP),    # the whole reduced matrix",
             "reduce_grads=lambda name, g: owned_block(all_reduce(g, DP), DP, F),")]
    for mode, verdict in (("duplicated", "EQUIVALENT"), ("blockwise", "NOT EQUIVALENT")):
        subs = base + [("MUON = Muon(matrix={\"W\": (\"F\", \"H\")})",
                        "MUON = Muon(matrix={\"W\": (\"F\", \"H\")})\n"
                        f"MUON_PLAN = Muon(matrix={{\"W\": (\"F\", \"H\")}}, tp_mode=\"{mode}\")")]
        r = prove(load_variant("B48_fixed", tmp_path, subs), timeout_s=60)
        assert r.verdict == verdict, (mode, r.verdict)


# -- B52(b): grad=None is not a zero gradient ----------------------------------------------------

def test_b52b_none_gradient_skips_adamw():
    cx = assert_refuted("B52b", goals_any=("exp_avg:experts", "exp_avg_sq:experts", "experts"))
    assert not any(o.startswith("grad:") for o in cx.others)   # None reads as 0 in the goal


def test_b52b_fixed_is_certified(tmp_path):
    assert_certified("B52b", tmp_path)


def test_b52b_class_none_vs_zero_depends_on_the_optimizer(tmp_path):
    # plain SGD without weight decay steps a zero gradient by nothing: None and 0 agree on
    # every input (no refutation); proving it needs "no token routed => gradient 0", a fact
    # about the routing the rewriting does not have, so the verdict stays UNKNOWN
    sgd = [("ADAMW = AdamW(lr=Fraction(1, 100), weight_decay=Fraction(1, 10))",
            "ADAMW = SGD(lr=Fraction(1, 100))"),
           ("    AdamW, Axis,", "    SGD, AdamW, Axis,")]
    r = prove(load_variant("B52b_buggy", tmp_path, sgd), timeout_s=60)
    assert r.verdict == "UNKNOWN" and r.counterexample is None
    assert {g.name for g in r.open_goals} >= {"experts"}
    # with weight decay SGD moves the weight of a zero-gradient expert: refuted again
    sgd_wd = [("ADAMW = AdamW(lr=Fraction(1, 100), weight_decay=Fraction(1, 10))",
               "ADAMW = SGD(lr=Fraction(1, 100), weight_decay=Fraction(1, 10))"),
              ("    AdamW, Axis,", "    SGD, AdamW, Axis,")]
    r = prove(load_variant("B52b_buggy", tmp_path, sgd_wd), timeout_s=60)
    assert r.verdict == "NOT EQUIVALENT" and r.counterexample.goal == "experts"
