"""DeepSeek-V3's parallelism, PP x EP x ZeRO-1 DP with micro-batches (spec_lang/plans/deepseek.py):
the debug example is certified, the DeepSeek-V3 model at real widths and reduced depth is
EQUIVALENT, and mutants of the all-to-all, the gradient groups, the ZeRO-1 shards, the scale
factors and the routing bias are rejected."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from proofs.certificate import certificate_of, write_certificate
from proofs.checker import check_certificate
from proofs.prover import prove
from spec_lang import AdamW, PlanError, all_reduce, build_problem, load, ops
from spec_lang.models.deepseek import DEEPSEEK_DEBUG, deepseek
from spec_lang.models.moe import MOE_DEBUG, moe
from spec_lang.plans.deepseek import (
    AUX_PREFACTOR, LOSS_PREFACTOR, DeepSeekParallelSettings, deepseek_layer_split,
    deepseek_v3_parallel,
)
from spec_lang.plans.clipping import global_grad_norm_sq
from spec_lang.plans.megatron import GRAD_ACCUM, Scale
from spec_lang.term import Op, walk

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "moe_debug_ep_pp.py"
FRONTIER = ROOT / "examples" / "deepseek_v3.py"
MOE2 = moe(dataclasses.replace(MOE_DEBUG, batch=16, n_layers=2))     # 2 layers, B = 16


def _frontier_build():
    """``build`` of examples/deepseek_v3.py without its module-level full-size trace."""
    src = FRONTIER.read_text().replace("\nspec, plan = build()\n", "\n")
    assert "build()" not in src.split("def build")[0]
    ns: dict = {}
    exec(compile(src, str(FRONTIER), "exec"), ns)                   # noqa: S102
    return ns["build"]


def _prove(spec, plan, timeout_s=300):
    return prove(build_problem(spec, plan), timeout_s=timeout_s)


def _moe_plan(**settings):
    return deepseek_v3_parallel(MOE2, pp=2, ep=2, dp=2, microbatches=2,
                                settings=DeepSeekParallelSettings(**settings))


# -- EQUIVALENT ------------------------------------------------------------------------------------

def test_debug_example_is_certified_with_micro_batches(tmp_path):
    problem = load(EXAMPLE)
    ops_ = {n.op for g in problem.goals for n in walk(g.actual)}
    assert {Op.ALL_TO_ALL, Op.REDUCE_SCATTER, Op.ALL_GATHER, Op.RANK_CONST} <= ops_
    assert problem.binding["mb"] == 2 and problem.binding["pp"] == 2
    report = prove(problem, timeout_s=300)
    assert report.verdict == "EQUIVALENT", [(g.name, g.reason) for g in report.open_goals]
    cert = tmp_path / "ep_pp.json"
    write_certificate(cert, certificate_of(report))
    res = check_certificate(cert, retrace=True, plan_path=EXAMPLE)
    assert res.verdict == "EQUIVALENT" and res.checked == res.total, res.summary()


def test_real_widths_reduced_depth_is_equivalent():
    # DeepSeek-V3 widths (hidden 7168, MLA, 256 experts top-8, vocab 129280), 1 dense + 1 MoE
    # layer + MTP (the embedding tied between stage 0 and MTP on stage 1), pp2 x ep2, K = 2
    spec, plan = _frontier_build()(pp=2, ep=2, dp=1, microbatches=2, n_layers=2,
                                   micro_batch_size=1)
    problem = build_problem(spec, plan)
    assert problem.binding["H"] == 7168 and problem.binding["E"] == 256
    r = prove(problem, timeout_s=300)
    assert r.verdict == "EQUIVALENT", [(g.name, g.reason) for g in r.open_goals][:5]


@pytest.mark.slow
def test_real_widths_with_clipping_is_equivalent():
    # as the frontier example: AdamW with DeepSeek-V3's hyper-parameters, clipping at 1.0
    spec, plan = _frontier_build()(pp=2, ep=2, dp=1, microbatches=2, n_layers=2,
                                   micro_batch_size=1, clip=True)
    assert spec.clip_grad_norm == 1 and plan.grad_norm_sq is not None
    r = _prove(spec, plan)
    assert r.verdict == "EQUIVALENT", [(g.name, g.reason) for g in r.open_goals][:5]


@pytest.mark.slow
def test_real_widths_four_stages_is_equivalent():
    spec, plan = _frontier_build()(pp=4, ep=8, dp=2, microbatches=4, n_layers=4,
                                   micro_batch_size=1)
    r = _prove(spec, plan)
    assert r.verdict == "EQUIVALENT", [(g.name, g.reason) for g in r.open_goals][:5]


@pytest.mark.slow
def test_deepseek_debug_model_uneven_split_is_equivalent():
    # 4 layers (1 dense) + MTP on 3 stages: split [2, 1, 1]; GPipe instead of 1F1B
    model = deepseek(dataclasses.replace(DEEPSEEK_DEBUG, batch=8, kv_lora_rank=8))
    plan = deepseek_v3_parallel(model, pp=3, ep=2, dp=2, microbatches=2,
                                settings=DeepSeekParallelSettings(schedule="gpipe"))
    r = _prove(model.spec(AdamW()), plan)
    assert r.verdict == "EQUIVALENT", [(g.name, g.reason) for g in r.open_goals][:5]


def test_layer_split_of_deepseek_v3():
    split = deepseek_layer_split(61, 16)
    assert [len(r) for r in split] == [4] * 15 + [1]
    assert split[0] == range(0, 4) and split[-1] == range(60, 61)
    assert [len(r) for r in deepseek_layer_split(5, 4)] == [2, 1, 1, 1]   # no empty stage
    assert [len(r) for r in deepseek_layer_split(4, 2, [3, 1])] == [3, 1]
    with pytest.raises(PlanError, match="at least one layer"):
        deepseek_layer_split(4, 2, [4, 0])
    with pytest.raises(PlanError, match="cannot fill"):
        deepseek_layer_split(2, 4)


def test_frontier_example_plan_shape():
    # the full-size module builds PP16 x EP64 x DP2 (tracing it is the benchmark's job)
    spec, plan = _frontier_build()(n_layers=16)
    assert dict(plan.mesh.sizes) == {"pp": 16, "dp": 2, "ep": 64}
    assert plan.microbatches.k == 30
    assert spec.data["tokens"].dims[0].size == 2 * 64 * 30 * 4 == 15360
    assert plan.optimizer_placements["layers.3.moe.experts.w1"] == {
        "dp": plan.optimizer_placements["layers.3.moe.experts.w1"]["dp"],
        "ep": plan.placements["layers.3.moe.experts.w1"]["ep"]}


# -- mutants: refuted by the prover ----------------------------------------------------------------

NO_K = Scale("dp*ep", (("dp", 1), ("ep", 1)), "mutant: the K of the aux pre-factor dropped")
ANY = ""
MUTANTS = {
    # name: (settings, first diverging goal (prefix), constant factor or None)
    # the expert outputs are all-gathered over E instead of returned by the reverse all-to-all:
    # each rank's experts only ever see its own tokens (no token exchange)
    "combine_all_gather_no_all_to_all": (dict(exchange="all_gather"), ANY, None),
    # expert gradients summed over ep as well: other ranks' experts are added in
    "expert_grad_reduced_over_ep": (dict(expert_grad_axes=("dp", "ep")), "grad:layers.", None),
    # the aux term's pre-factor misses K while its 1/K stays: aux gradient 1/K too small
    "aux_scale_without_micro_batch_factor": (dict(aux_scale=(NO_K, GRAD_ACCUM)),
                                             "grad:layers.", None),
    # ZeRO-1: the rank steps its owned block of a gradient not reduced over dp (stale shard)
    "zero1_owned_block_not_reduced_over_dp": (dict(dense_grad_axes=("ep",)), "grad:", None),
    # Megatron's 1/num_microbatches missing: every token-loss gradient K = 2 times too large
    # (the reported loss is right: the factor sits in the seed only)
    "loss_scale_without_1_over_K": (dict(loss_scale=(LOSS_PREFACTOR,)), "grad:", 2.0),
    # the auxiliary-loss-free selection bias ignored by the router (not what the spec selects)
    "router_selection_bias_ignored": (dict(bias="none"), ANY, None),
    # the stages' balance-loss terms never reach the loss (MoEAuxLossAutoScaler missing)
    "aux_loss_not_added_on_stage": (dict(aux_on_stage=False), ANY, None),
    # the dispatcher's token permutation not undone by the combine
    "combine_without_unpermute": (dict(unpermute=False), ANY, None),
}


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_mutant_is_refuted(name):
    settings, goal, ratio = MUTANTS[name]
    r = _prove(MOE2.spec(AdamW()), _moe_plan(**settings), timeout_s=120)
    assert r.verdict == "NOT EQUIVALENT", (name, r.verdict)
    cx = r.counterexample
    assert cx.goal.startswith(goal), (name, cx.goal)
    if name == "expert_grad_reduced_over_ep":
        assert ".moe.experts." in cx.goal, cx.goal
    if ratio is not None:
        assert cx.ratio == pytest.approx(ratio), (name, cx.goal, cx.ratio)
    else:
        assert any(abs(s - p) > 1e-9 * max(1.0, abs(s)) for _, s, p in cx.values), cx.render()


def test_deepseek_tied_embedding_not_reduced_over_pp_is_refuted():
    # MTP on the last stage uses the embedding too (DeepSeek-V3 sec. 2.2): without the pp
    # all-reduce each holder steps with its own uses' gradient only
    model = deepseek(dataclasses.replace(DEEPSEEK_DEBUG, n_layers=2, batch=4))
    plan = deepseek_v3_parallel(model, pp=2, ep=2, dp=1, microbatches=2,
                                settings=DeepSeekParallelSettings(tied_reduce=False))
    r = _prove(model.spec(AdamW()), plan, timeout_s=120)
    assert r.verdict == "NOT EQUIVALENT"
    assert r.counterexample.goal in ("grad:tok_embeddings", "tok_embeddings",
                                     "exp_avg:tok_embeddings", "exp_avg_sq:tok_embeddings")



def test_the_tied_embedding_gradient_is_cut_at_the_layer_boundaries():
    """Issue 14: the per-stage parts of a tied parameter's gradient are traced with the other
    stages' uses stop-gradient; without those marks in the result they share the main trace's
    adjoints, so the premise of ``grad:tok_embeddings`` is cut at the adjoints of the first
    block and of the MTP block (at main it was proved on its whole terms, all layers deep)."""
    from proofs.cut import build_cuts, cut_obligations

    model = deepseek(dataclasses.replace(DEEPSEEK_DEBUG, n_layers=2, batch=4))
    plan = deepseek_v3_parallel(model, pp=2, ep=2, dp=1, microbatches=2)
    problem = build_problem(model.spec(AdamW()), plan)
    goal = next(g for g in problem.goals if g.name == "grad:tok_embeddings")
    stopped = [t for t in walk([goal.actual]) if t.op is Op.STOP_GRAD
               and t.args[0].op is Op.INPUT and t.args[0].attrs[0] == "tok_embeddings"]
    assert stopped == []
    cuts = build_cuts(problem.cut_points)
    _, premises = cut_obligations(problem.goals, cuts)
    uses = premises["grad:tok_embeddings"].uses
    assert "layers.0:adj" in uses and "mtp.0:adj" in uses, uses
    assert _prove(model.spec(AdamW()), plan, timeout_s=120).verdict == "EQUIVALENT"

# -- clipping (DeepSeek-V3 sec. 4.2: global norm 1.0) ----------------------------------------------

def _clip_plan(norm_sq=None):
    plan = deepseek_v3_parallel(MOE2, pp=2, ep=2, dp=2, microbatches=2, clip=True)
    return plan if norm_sq is None else dataclasses.replace(plan, grad_norm_sq=norm_sq(plan))


def _expert_norm_over_dp_only(plan):
    # B23's class (DeepSpeed #8478): expert blocks differ per ep rank, but their squares are
    # summed over dp only, as if the experts were replicated over ep
    pipe = plan.schedule

    def norm_sq(grads):
        vals = {}
        for s in range(2):
            mine = pipe.stage_grads(s, grads)
            dense = global_grad_norm_sq({k: g for k, g in mine.items() if ".experts." not in k})
            exp = [g for k, g in mine.items() if ".experts." in k]
            sq = sum_sq(exp)
            vals[s] = dense + all_reduce(sq, "dp") if sq is not None else dense
        return all_reduce(pipe.per_stage(vals), "pp")
    return norm_sq


def sum_sq(gs):
    out = None
    for g in gs:
        x = ops.sum(g * g)
        out = x if out is None else out + x
    return out


def test_clipping_is_equivalent_and_expert_norm_over_dp_only_is_refuted():
    spec = MOE2.spec(AdamW(), clip_grad_norm=1)
    r = _prove(spec, _clip_plan())
    assert r.verdict == "EQUIVALENT", [(g.name, g.reason) for g in r.open_goals][:5]
    r = _prove(spec, _clip_plan(_expert_norm_over_dp_only))
    assert r.verdict == "NOT EQUIVALENT" and r.counterexample.goal == "grad_norm"


# -- mutants: rejected while tracing --------------------------------------------------------------

def test_zero1_missing_all_gather_over_ep_is_a_plan_error():
    # the updated dense block V[dp, ep] all-gathered over dp only: the ep gather is missing
    with pytest.raises(PlanError, match=r"deepseek\.py:\d+: all_gather .* innermost shard must "
                                        r"be 'dp'"):
        build_problem(MOE2.spec(AdamW()), _moe_plan(gather_axes=("dp",)))


def test_unknown_modes_are_plan_errors():
    for kw, what in ((dict(schedule="dualpipe"), "schedule"), (dict(exchange="p2p"), "exchange"),
                     (dict(bias="trained"), "bias")):
        with pytest.raises(PlanError, match=rf"test_frontier_deepseek\.py:\d+: {what}"):
            deepseek_v3_parallel(MOE2, pp=2, ep=2, dp=2, microbatches=2,
                                 settings=DeepSeekParallelSettings(**kw))


def test_batch_not_divisible_is_a_plan_error():
    model = moe(dataclasses.replace(MOE_DEBUG, batch=4, n_layers=2))
    with pytest.raises(PlanError, match="microbatches"):
        build_problem(model.spec(AdamW()),
                      deepseek_v3_parallel(model, pp=2, ep=2, dp=2, microbatches=4))
