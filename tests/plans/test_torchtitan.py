"""torchtitan-style 2-D / 3-D and Megatron 3-D (spec_lang/plans/torchtitan.py), and the MoE
adapters of the plan library (spec_lang/plans/library.py): proved on the tiny Llama and the
tiny MoE, certificates re-checked, placements as documented, bad sizes rejected with the
user's line. The mutants are in tests/plans/test_library_mutants.py."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from proofs.certificate import certificate_of, write_certificate
from proofs.checker import check_certificate
from proofs.prover import prove
from spec_lang import AdamW, PlanError, build_problem, load
from spec_lang.models import DEBUG, llama
from spec_lang.models.moe import MOE_DEBUG, moe
from spec_lang.placement import Replicate, Shard
from spec_lang.plans.library import (
    distributed_optimizer, moe_context_parallel, moe_megatron, moe_megatron_placements,
    moe_zero1,
)
from spec_lang.plans.torchtitan import (
    TorchtitanSettings, megatron_3d, pp_layer_split, torchtitan_2d, torchtitan_3d,
)
from spec_lang.term import Op, walk

ROOT = Path(__file__).resolve().parents[2]
LLAMA = llama(dataclasses.replace(DEBUG, batch=8))
MOE = moe(dataclasses.replace(MOE_DEBUG, batch=8))
MOE2 = moe(dataclasses.replace(MOE_DEBUG, batch=8, n_layers=2))


def _prove(model, plan, **spec_kw):
    return prove(build_problem(model.spec(AdamW(), **spec_kw), plan), timeout_s=60)


@pytest.mark.parametrize("name", [pytest.param("llama_debug_3d", marks=pytest.mark.slow),
                                  "moe_debug_3d", "moe_debug_megatron_sp", "moe_debug_cp"])
def test_example_certificate_is_accepted(tmp_path, name):
    """moe_debug_cp's certificate uses lift-perm-topk: the checker's copy re-checks it."""
    path = ROOT / "examples" / f"{name}.py"
    report = prove(load(path), timeout_s=60)
    assert report.verdict == "EQUIVALENT", [(g.name, g.reason) for g in report.open_goals]
    cert = tmp_path / f"{name}.json"
    write_certificate(cert, certificate_of(report))
    r = check_certificate(cert, retrace=True, plan_path=path)
    assert r.verdict == "EQUIVALENT" and r.checked == r.total > 0, r.summary()


@pytest.mark.parametrize("model", [LLAMA, MOE2], ids=["llama", "moe"])
@pytest.mark.parametrize("schedule,k", [("gpipe", 4),
                                        pytest.param("1f1b", 4, marks=pytest.mark.slow)])
def test_3d_other_schedules_and_microbatches(model, schedule, k):
    plan = torchtitan_3d(model, dp=2, tp=2, pp=2, microbatches=k,
                         settings=TorchtitanSettings(schedule=schedule))
    assert _prove(model, plan).verdict == "EQUIVALENT"


def test_3d_sends_activations_and_gathers_over_dp():
    """The 3-D plan's terms hold the FSDP all-gather regions and the pipeline's buffer (the
    gradient of a stage-0 parameter is the reduce-scatter over dp of a 1F1B buffer)."""
    plan = torchtitan_3d(MOE2, dp=2, tp=2, pp=2, microbatches=2)
    pr = build_problem(MOE2.spec(AdamW()), plan)
    ops_ = {n.op for g in pr.goals if g.name == "grad:layers.0.moe.router"
            for n in walk(g.actual)}
    assert Op.ALL_REDUCE in ops_ and Op.SHARD in ops_
    assert plan.mesh.sizes == {"pp": 2, "dp": 2, "tp": 2}


def test_placements_are_the_documented_ones():
    d = MOE.dims
    pl = moe_megatron_placements(MOE, 2)
    assert pl["layers.0.moe.experts.w1"] == {"tp": Shard(d.FE)}       # ETP = TP, column
    assert pl["layers.0.moe.experts.w2"] == {"tp": Shard(d.FE)}       # row-parallel
    assert pl["layers.0.moe.shared.w1"] == {"tp": Shard(d.FS)}
    assert pl["layers.0.moe.router"] == {"tp": Replicate()}
    assert pl["layers.0.attn.wk"] == {"tp": Replicate()}              # 1 KV head < tp
    assert pl["layers.0.attn.wq"] == {"tp": Shard(d.G)}
    assert "layers.0.moe.e_score_correction_bias" not in pl           # replicated data
    p3 = torchtitan_3d(MOE2, dp=2, tp=2, pp=2, microbatches=2).placements
    assert p3["layers.1.moe.experts.w1"] == {"dp": Shard(d.E), "tp": Shard(d.FE)}
    p2 = torchtitan_2d(MOE, dp=2, tp=2).placements
    assert p2["layers.0.moe.experts.w3"] == {"dp": Shard(d.E), "tp": Shard(d.FE)}
    assert "layers.0.moe.e_score_correction_bias" not in p2
    z = distributed_optimizer(MOE, tp=2, dp=2, microbatches=2)
    assert z.placements["layers.0.moe.experts.w1"] == {"tp": Shard(d.FE)}
    assert z.optimizer_placements["layers.0.moe.experts.w1"] == {"dp": Shard(d.E),
                                                                  "tp": Shard(d.FE)}


def test_other_sizes_are_equivalent():
    assert _prove(MOE, moe_megatron(MOE, tp=2, dp=1, microbatches=4, sp=True)).verdict == \
        "EQUIVALENT"
    softmax = moe(dataclasses.replace(MOE_DEBUG, batch=8, gating="softmax", n_shared_experts=0,
                                      balance_bias=False))
    assert _prove(softmax, torchtitan_2d(softmax, dp=2, tp=2, microbatches=2)).verdict == \
        "EQUIVALENT"
    assert _prove(softmax, moe_context_parallel(softmax, cp=2, dp=1)).verdict == "EQUIVALENT"
    assert _prove(MOE, moe_zero1(MOE, dp=2, clip=True),
                  clip_grad_norm=1).verdict == "EQUIVALENT"


def test_pp_not_dividing_the_layers_names_the_user_line():
    with pytest.raises(PlanError, match=r"test_torchtitan\.py:\d+: pp=2 must divide the 1 layers"):
        torchtitan_3d(MOE, dp=2, tp=2, pp=2, microbatches=2)
    assert [list(r) for r in pp_layer_split(4, 2)] == [[0, 1], [2, 3]]


def test_unknown_schedule_and_data_parallel_are_plan_errors():
    with pytest.raises(PlanError, match="schedule 'zb'"):
        torchtitan_3d(LLAMA, dp=2, tp=2, pp=2, microbatches=2,
                      settings=TorchtitanSettings(schedule="zb"))
    with pytest.raises(PlanError, match="data_parallel 'zero'"):
        torchtitan_3d(LLAMA, dp=2, tp=2, pp=2, microbatches=2,
                      settings=TorchtitanSettings(data_parallel="zero"))


def test_wrong_model_kinds_are_plan_errors():
    with pytest.raises(PlanError, match=r"test_torchtitan\.py:\d+: moe_megatron needs an MoEModel"):
        moe_megatron(LLAMA, tp=2, dp=2, microbatches=2)
    with pytest.raises(PlanError, match="torchtitan plans needs a model following spec_lang.models.protocol"):
        torchtitan_2d(object(), dp=2, tp=2)


def test_megatron_3d_is_ddp():
    plan = megatron_3d(LLAMA, tp=2, dp=2, pp=2, microbatches=2)
    assert "dp" not in plan.placements["layers.0.mlp.w1"]
    assert plan.placements["layers.0.mlp.w1"] == {"tp": Shard(LLAMA.dims.F)}
    assert "Megatron-LM 3-D: DDP" in plan.assumptions[0]
