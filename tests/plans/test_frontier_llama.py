"""The Llama frontier plans (issue 5) at reduced depth, real widths.

``examples/llama3_70b_megatron_3d.py`` (Megatron TP8+SP x PP4 x DP16, 32 micro-batches),
``examples/llama31_405b.py`` (TP8+SP x PP16 x FSDP DP64, 16 micro-batches, Llama 3's 7/8x14/7
stages) and ``examples/llama31_405b_cp16.py`` (the same with CP16 at sequence 131072) are
built through their ``build(...)`` with few layers; each is proved EQUIVALENT and its
certificate re-checked (re-tracing a plan file that calls ``build``), and mutants of each plan
(one setting changed) are refuted with the diverging goal and, for constant-factor bugs, the
factor.

Unmarked instances use a smaller mesh (dp 2, 2-4 micro-batches, pp 4 (pp 2 with cp 2)) at
the real widths and tp 8; the real mesh sizes run under ``-m slow`` (the refuter's cost grows
with dp x micro-batches and, for CP, with the sequence it keeps per rank).
"""

from __future__ import annotations

import dataclasses
import importlib.util
from functools import cache
from pathlib import Path

import pytest

from proofs.certificate import certificate_of, write_certificate
from proofs.checker import check_certificate
from proofs.prover import prove
from spec_lang import PlanError, build_problem, load
from spec_lang.plans.context_parallel import CPSettings
from spec_lang.plans.megatron import GRAD_ACCUM, LOSS_PREFACTOR, MegatronSettings
from spec_lang.plans.torchtitan import (
    TorchtitanSettings, first_last_lighter_split, pp_layer_split,
)
from spec_lang.term import Axis

ROOT = Path(__file__).resolve().parents[2]
DP, CP, MB, TP = Axis.DP, Axis.CP, Axis.MB, Axis.TP

L70, L405, L405CP = "llama3_70b_megatron_3d", "llama31_405b", "llama31_405b_cp16"

# unmarked instances: real widths, tp 8, smaller dp / micro-batches / pp / cp
SMALL = {
    L70: dict(n_layers=4, dp=2, microbatches=4),                       # 1 layer per stage
    L405: dict(n_layers=6, pp=4, dp=2, microbatches=4, micro_batch_size=1),   # 1/2/2/1
    L405CP: dict(n_layers=2, pp=2, cp=2, dp=2, microbatches=2),
}
# the real mesh sizes at reduced depth (slow: the refuter evaluates every dp x mb block)
FULL_MESH = {
    L70: dict(n_layers=4),
    L405: dict(n_layers=30, micro_batch_size=1),                      # 1/2x14/1 stages
    L405CP: dict(n_layers=16, dp=1, microbatches=2),
}


@cache
def _example(name: str):
    spec = importlib.util.spec_from_file_location(f"frontier_{name}",
                                                  ROOT / "examples" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _prove(name: str, **kw):
    spec, plan = _example(name).build(**kw)
    return prove(build_problem(spec, plan), timeout_s=600)


def _certify(name: str, kw: dict, tmp_path: Path) -> None:
    """Prove the plan file ``spec, plan = build(**kw)`` and re-check its certificate (re-traced)."""
    plan_file = tmp_path / f"{name}_reduced.py"
    example = str(ROOT / "examples" / f"{name}.py")
    plan_file.write_text(
        "import importlib.util\n"
        f"_s = importlib.util.spec_from_file_location('ex', {example!r})\n"
        "_m = importlib.util.module_from_spec(_s)\n"
        "_s.loader.exec_module(_m)\n"
        f"spec, plan = _m.build(**{kw!r})\n")
    report = prove(load(plan_file), timeout_s=600)
    assert report.verdict == "EQUIVALENT", [(g.name, g.reason) for g in report.open_goals]
    cert = tmp_path / f"{name}.cert.json"
    write_certificate(cert, certificate_of(report))
    res = check_certificate(cert, retrace=True, plan_path=plan_file)
    assert res.verdict == "EQUIVALENT" and res.checked == res.total > 0, res.summary()


@pytest.mark.parametrize("name", [L70, L405, L405CP])
def test_reduced_depth_is_certified(name, tmp_path):
    _certify(name, SMALL[name], tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("name", [L70, L405, L405CP])
def test_reduced_depth_real_mesh_is_certified(name, tmp_path):
    _certify(name, FULL_MESH[name], tmp_path)


def test_interleaved_schedule_with_embedding_only_first_chunk():
    """The paper's interleaved 1F1B: ``pp * v`` virtual stages, the first holding only the
    embedding and the last only the head and loss (here pp 4, v 2, 6 layers: 0/1x6/0)."""
    kw = dict(SMALL[L405], chunks=2)
    spec, plan = _example(L405).build(**kw)
    assert "(interleaved_1f1b v=2, 4 micro-batches, layers per stage 0/1x6/0)" \
        in plan.assumptions[-1]
    r = prove(build_problem(spec, plan), timeout_s=600)
    assert r.verdict == "EQUIVALENT", [(g.name, g.reason) for g in r.open_goals]
    assert first_last_lighter_split(126, 16 * 8) == (0,) + (1,) * 126 + (0,)


def test_full_size_modules_have_the_documented_mesh():
    """The module-level plans are the full configurations (built, not traced here)."""
    p70 = _example(L70).plan
    assert p70.mesh.sizes == {"pp": 4, "dp": 16, "tp": 8}
    assert "TP8+SP x PP4 (1f1b, 32 micro-batches)" in p70.assumptions[-1]
    p405 = _example(L405).plan
    assert p405.mesh.sizes == {"pp": 16, "dp": 64, "tp": 8}
    assert "FSDP over dp64 x TP8+SP x PP16 (1f1b, 16 micro-batches, layers per stage 7/8x14/7)" \
        in p405.assumptions[-1]
    pcp = _example(L405CP).plan
    assert pcp.mesh.sizes == {"pp": 16, "dp": 4, "cp": 16, "tp": 8}
    assert _example(L405CP).spec.data["tokens"].dims[1].size == 131072
    d = _example(L405).spec
    assert len([k for k in d.params if k.endswith(".attn.wq")]) == 126


def test_llama3_stage_split():
    """126 layers over 16 stages: one layer fewer on the first and last stage (arXiv 2407.21783
    sec. 3.3.2)."""
    sizes = first_last_lighter_split(126, 16)
    assert sizes == (7,) + (8,) * 14 + (7,)
    split = pp_layer_split(126, 16, sizes)
    assert split[0] == range(0, 7) and split[1] == range(7, 15) and split[-1] == range(119, 126)
    with pytest.raises(PlanError, match="stage_layers .* summing to the 126 layers"):
        pp_layer_split(126, 16, (8,) * 16)
    with pytest.raises(PlanError, match="must divide n_layers \\+ 2"):
        first_last_lighter_split(127, 16)


# -- mutants ---------------------------------------------------------------------------------------

def _tt(**kw):
    return TorchtitanSettings(**kw)


def _ms(**kw):
    return MegatronSettings(**kw)


# (id, example, settings, expected goal (or prefix + '*'), ratio or None)
MUTANTS = [
    # Megatron 3-D (DDP): the dp all-reduce of the gradients is missing
    ("70b_missing_dp_allreduce", L70, _tt(megatron=_ms(grad_reduce_axes=())), "grad:*", None),
    # DDP's 1/dp average is missing: the dp-summed gradient is dp x too large
    ("70b_missing_dp_average", L70, _tt(grad_scale=()), "grad:output", 2.0),
    # the micro-batch loss is not divided by K (Megatron's forward_step 1/num_microbatches)
    ("70b_loss_not_divided_by_k", L70, _tt(megatron=_ms(loss_scale=(LOSS_PREFACTOR,))),
     "grad:output", 4.0),
    # SP: the RMSNorm weights' Partial[tp] gradients are not all-reduced over tp
    ("70b_sp_norm_grad_not_reduced", L70, _tt(megatron=_ms(sp_grad_reduce_axes=())),
     "grad:*norm", None),
    # FSDP: the gradient reduce-scatter is not averaged (1/dp missing)
    ("405b_fsdp_missing_average", L405, _tt(grad_scale=()), "grad:output", 2.0),
    # FSDP: the unshard all-gather declared with a split backward (no reduce-scatter)
    ("405b_fsdp_gather_split_backward", L405, _tt(gather=("all_gather", "split")), "grad:*",
     None),
    # 1/K applied twice (engine and trainer)
    ("405b_loss_scale_k_twice", L405,
     _tt(megatron=_ms(loss_scale=(LOSS_PREFACTOR, GRAD_ACCUM, GRAD_ACCUM))), "grad:output", 0.25),
    # SP: the norm-weight gradients are not all-reduced over tp
    ("405b_sp_norm_grad_not_reduced", L405, _tt(megatron=_ms(sp_grad_reduce_axes=())),
     "grad:*norm", None),
    # CP: labels split contiguously while the tokens use the load-balanced chunk order (B33)
    ("cp_labels_wrong_chunk_order", L405CP, _tt(context=CPSettings(label_map="contiguous")),
     "loss", None),
    # CP: RoPE positions 0 .. S/cp - 1 on every rank instead of the global positions
    ("cp_rope_local_positions", L405CP, _tt(context=CPSettings(rope_positions="local")),
     "loss", None),
    # CP: the K/V gather's backward is a split: dK/dV from the other ranks' queries are lost
    ("cp_kv_gather_split_backward", L405CP,
     _tt(context=CPSettings(gather_kv=("all_gather", "split"))), "grad:*", None),
    # CP: gradients not summed over cp
    ("cp_grads_not_reduced_over_cp", L405CP, _tt(context=CPSettings(grad_reduce_axes=(DP,))),
     "grad:*", None),
    # CP: the token count is not summed over cp (each cp rank divides by its own count)
    ("cp_token_count_without_cp", L405CP, _tt(context=CPSettings(token_count_axes=(DP,))),
     "loss", None),
    # B14 (TP x CP): the norm-weight gradient is all-reduced over tp twice: tp x the spec
    ("cp_b14_norm_grad_reduced_twice_over_tp", L405CP,
     _tt(megatron=_ms(sp_grad_reduce_axes=(TP, TP))), "grad:*norm", 8.0),
]
SLOW_MUTANTS = {"405b_loss_scale_k_twice", "cp_token_count_without_cp",    # ~5 s each
                "cp_grads_not_reduced_over_cp", "70b_missing_dp_allreduce",
                "70b_loss_not_divided_by_k", "405b_fsdp_missing_average",
                "405b_sp_norm_grad_not_reduced", "cp_rope_local_positions",
                "cp_kv_gather_split_backward"}


def _goal_ok(goal: str, want: str) -> bool:
    if want.endswith("*"):
        return goal.startswith(want[:-1])
    if "*" in want:
        head, tail = want.split("*")
        return goal.startswith(head) and goal.endswith(tail)
    return goal == want


@pytest.mark.parametrize("mid,name,settings,goal,ratio", [
    pytest.param(*m, id=m[0], marks=[pytest.mark.slow] if m[0] in SLOW_MUTANTS else [])
    for m in MUTANTS])
def test_mutant_is_refuted(mid, name, settings, goal, ratio):
    r = _prove(name, **SMALL[name], settings=settings)
    assert r.verdict == "NOT EQUIVALENT", (mid, r.verdict,
                                           [(g.name, g.reason) for g in r.open_goals][:3])
    cx = r.counterexample
    assert _goal_ok(cx.goal, goal), (mid, cx.goal)
    if ratio is not None:
        assert cx.ratio == pytest.approx(ratio, rel=1e-6), (mid, cx.ratio)
    else:
        assert cx.ratio is None or abs(cx.ratio - 1) > 1e-6, (mid, cx.ratio)
        assert any(abs(s - p) > 1e-9 * max(1.0, abs(s)) for _, s, p in cx.values), cx.render()


def test_missing_kv_gather_is_rejected_while_tracing():
    """Without the K/V all-gather the rank's keys stay sequence-sharded over cp: attention over
    a cp-sharded key dim against the full causal mask does not type (PlanError)."""
    st = _tt(context=CPSettings(gather_kv=("identity", "identity")))
    spec, plan = _example(L405CP).build(**SMALL[L405CP], settings=st)
    with pytest.raises(PlanError):
        build_problem(spec, plan)


def test_settings_do_not_leak_between_builds():
    """``build(settings=...)`` keeps the example's stage split and SP."""
    _, plan = _example(L405).build(**SMALL[L405], settings=_tt(grad_scale=()))
    assert "layers per stage 1/2x2/1" in plan.assumptions[-1]
    assert "TP8+SP" in plan.assumptions[-1]
    assert dataclasses.fields(TorchtitanSettings)
