"""The Megatron plan library and its examples: placements, scale factors, errors, and every
goal of the examples matching the spec (refuted nowhere; proved where the prover is fast)."""

import importlib.util
from dataclasses import replace
from pathlib import Path

import pytest

from proofs.reduction import reduce_binding
from proofs.refute import refute
from spec_lang import AdamW, PlanError, Replicate, Shard, build_problem, load
from spec_lang.models import DEBUG, LLAMA3_8B, llama
from spec_lang.plans import (
    DP_AVERAGE, GATHER_FROM_TP, GRAD_ACCUM, LOSS_PREFACTOR, PLANS, MegatronSettings, layer_plan,
    megatron, plan_registry,
)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
KVREP = replace(DEBUG, name="debug_kvrep", n_kv_heads=1)


def _no_counterexample(problem, reduce=False):
    binding = problem.binding
    if reduce:
        roots = [t for g in problem.goals for t in (g.expected, g.actual)]
        binding = reduce_binding(roots, problem.binding)
    r = refute(problem.goals, binding, problem.mesh)
    assert not r.skipped, r.skipped
    assert r.counterexample is None, r.counterexample.render()


def _example(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# -- placements ------------------------------------------------------------------------------------

def test_layer_plan_splits_kv_heads_when_they_divide():
    d = llama(DEBUG).dims
    lp = layer_plan(DEBUG, 2)
    for w in ("attn.wq", "attn.wk", "attn.wv", "attn.wo"):
        assert lp[w] == {"tp": Shard(d.KVH)}
    assert lp["mlp.w1"] == lp["mlp.w3"] == lp["mlp.w2"] == {"tp": Shard(d.F)}
    assert lp["attention_norm"] == lp["ffn_norm"] == {"tp": Replicate()}


def test_layer_plan_replicates_kv_and_splits_query_groups_when_kv_heads_lt_tp():
    d = llama(KVREP).dims
    lp = layer_plan(KVREP, 2)
    assert lp["attn.wq"] == lp["attn.wo"] == {"tp": Shard(d.G)}
    assert lp["attn.wk"] == lp["attn.wv"] == {"tp": Replicate()}


def test_layer_plan_rejects_a_tp_that_splits_neither():
    with pytest.raises(PlanError, match=r"tp=4 splits neither the 2 KV heads .* 2 query heads"):
        layer_plan(DEBUG, 4)


def test_placements_cover_vocab_parallel_embedding_and_head():
    plan = megatron(llama(DEBUG), tp=2, dp=2, microbatches=2)
    assert plan.placements["tok_embeddings"] == {"tp": Shard("V")}
    assert plan.placements["output"] == {"tp": Shard("V")}
    assert plan.placements["norm"] == {"tp": Replicate()}
    assert plan.placements["tokens"] == {"dp": Shard("B")}
    assert plan.microbatches.k == 2 and plan.microbatches.dim == "B"


def test_batch_that_dp_times_k_does_not_divide_is_a_plan_error():
    model = llama(DEBUG)                       # B = 4
    with pytest.raises(PlanError, match=r"microbatches\(4\) does not divide"):
        build_problem(model.spec(AdamW()), megatron(model, tp=2, dp=2, microbatches=4))


def test_megatron_accepts_config_model_or_spec():
    model = llama(DEBUG)
    for x in (DEBUG, model, model.spec(AdamW())):
        assert megatron(x, tp=2, dp=1, microbatches=1).mesh.sizes == {"dp": 1, "tp": 2}
    with pytest.raises(PlanError, match="needs a model following spec_lang.models.protocol"):
        megatron("debug", tp=2, dp=1, microbatches=1)


def test_registry():
    assert plan_registry("megatron") is megatron is PLANS["megatron"]
    with pytest.raises(PlanError, match="unknown plan 'zero4'; known: \\[.*'megatron'.*\\]"):
        plan_registry("zero4")          # zero1-3 are sharded data-parallel recipes


# -- scale factors ---------------------------------------------------------------------------------

def test_scale_factors_cancel_to_one_per_token():
    """dp*K/N per micro-batch, 1/K, 1/dp: the product of the mesh powers is 1 (weight 1/N)."""
    total: dict[str, int] = {}
    for s in (LOSS_PREFACTOR, GRAD_ACCUM, DP_AVERAGE):
        assert s.reason
        for axis, k in s.powers:
            total[axis] = total.get(axis, 0) + k
    assert all(v == 0 for v in total.values())


# -- the examples match the spec -------------------------------------------------------------------

@pytest.mark.parametrize("name", ["llama_debug_megatron", "llama_debug_megatron_kvrep"])
def test_debug_examples_refute_nothing(name):
    _no_counterexample(load(EXAMPLES / f"{name}.py"))


@pytest.mark.parametrize("config,tp,dp,k", [
    (DEBUG, 2, 2, 2), (DEBUG, 1, 4, 1), (DEBUG, 2, 1, 4), (DEBUG, 1, 1, 1), (KVREP, 2, 1, 2),
    (replace(DEBUG, n_heads=8, n_kv_heads=2, hidden=32), 4, 1, 2),   # kv 2 < tp 4: G split
])
def test_other_meshes_prove_equivalent(config, tp, dp, k):
    model = llama(config)
    _prove(build_problem(model.spec(AdamW()), megatron(model, tp=tp, dp=dp, microbatches=k)),
           timeout_s=60)


def test_gathered_logits_variant_proves_equivalent():
    model = llama(DEBUG)
    plan = megatron(model, tp=2, dp=2, microbatches=2,
                    settings=MegatronSettings(gather_logits=GATHER_FROM_TP))
    _prove(build_problem(model.spec(AdamW()), plan), timeout_s=60)


def test_llama3_8b_two_layers_at_real_widths_refutes_nothing():
    spec, plan = _example("llama3_8b_megatron").build(n_layers=2)
    problem = build_problem(spec, plan)
    assert problem.binding["H"] == 4096 and problem.binding["V"] == 128256
    assert problem.mesh == {"dp": 4, "tp": 8, "mb": 4}
    _no_counterexample(problem, reduce=True)


def test_llama3_8b_example_traces_all_32_layers():
    problem = load(EXAMPLES / "llama3_8b_megatron.py")
    names = {g.name for g in problem.goals}
    assert "grad:layers.31.mlp.w2" in names and "exp_avg_sq:output" in names
    n_params = 1 + 9 * LLAMA3_8B.n_layers + 2        # embedding, 9 per layer, norm and head
    assert len(problem.goals) == 1 + 4 * n_params    # loss; grad, param, exp_avg, exp_avg_sq
    assert dict(problem.binding)["F"] == 14336 and problem.mesh["tp"] == 8


def test_build_scales_the_global_batch_with_dp_and_k():
    spec, plan = _example("llama3_8b_megatron").build(dp=64, tp=8, microbatches=16, n_layers=1)
    assert plan.mesh.sizes == {"dp": 64, "tp": 8} and plan.microbatches.k == 16
    assert spec.data["tokens"].dims[0].size == 64 * 16   # micro_batch_size 1 per rank


# -- proofs ----------------------------------------------------------------------------------------
# The plans carry their scale factors explicitly (dp*K/N and 1/K in the seed, 1/dp on the
# gradient), so each proof cancels them through the backward's einsums and sums.

def _prove(problem, timeout_s):
    from proofs.prover import prove

    report = prove(problem, timeout_s=timeout_s)
    assert report.verdict == "EQUIVALENT", [(g.name, g.reason) for g in report.open_goals][:5]


@pytest.mark.parametrize("name", ["llama_debug_megatron", "llama_debug_megatron_kvrep"])
def test_debug_examples_prove_equivalent(name):
    _prove(load(EXAMPLES / f"{name}.py"), timeout_s=60)


def test_llama3_8b_two_layers_prove_equivalent():
    spec, plan = _example("llama3_8b_megatron").build(n_layers=2)
    _prove(build_problem(spec, plan), timeout_s=60)


@pytest.mark.slow
def test_llama3_8b_example_proves_equivalent(request):
    if "slow" not in (request.config.getoption("-m") or ""):
        pytest.skip("the full 32-layer proof: run with -m slow")
    _prove(load(EXAMPLES / "llama3_8b_megatron.py"), timeout_s=600)


@pytest.mark.parametrize("name,config", [("llama_debug_megatron", DEBUG),
                                         ("llama_debug_megatron_kvrep", KVREP)])
def test_example_layer_plans_are_the_library_default(name, config):
    assert _example(name).layer_plan == layer_plan(config, 2)


def test_example_8b_layer_plan_is_the_library_default():
    spec, plan = _example("llama3_8b_megatron").build(n_layers=1)
    assert {k[len("layers.0."):]: v for k, v in plan.placements.items()
            if k.startswith("layers.0.")} == layer_plan(LLAMA3_8B, 8)


def test_public_names_are_documented():
    import spec_lang.plans

    doc = (ROOT / "docs" / "plans.md").read_text()
    missing = [n for n in spec_lang.plans.__all__ if f"`{n}" not in doc]
    assert not missing, missing
