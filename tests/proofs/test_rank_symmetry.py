"""Rank symmetry (docs/rank-symmetry.md): asymmetric plans fall out of the class and are caught.

A plan term is the program of one rank with its coordinates left symbolic, so one proof covers
every rank; a per-rank difference is visible in the term as a ``RANK_CONST`` (or a schedule's
per-stage coefficients). Each mutant below breaks the symmetry on one rank, stage or
micro-batch of a real plan; the prover must say NOT EQUIVALENT and the counterexample must
name the odd one. The refuter searches on a reduced mesh (``proofs.reduction.reduce_mesh``)
and confirms at the real mesh sizes; the unit tests at the end check that reduction.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
from fractions import Fraction
from pathlib import Path

import sys

import pytest

from spec_lang import AdamW, SGD, build_problem, ops
from spec_lang.models.llama import SpecContext
from spec_lang.pipeline import Pipeline
from spec_lang.schedules import B, F, reset, scale
from spec_lang.term import Binding, Op, walk

from proofs.prover import prove
from proofs.reduction import eval_cost, reduce_binding, reduce_mesh

ROOT = Path(__file__).resolve().parents[2]
# the modules (spec_lang.models re-exports functions of the same names)
llama_models = sys.modules["spec_lang.models.llama"]
moe_models = sys.modules["spec_lang.models.moe"]
EPS, ODD_EPS = Fraction(1, 10**5), Fraction(1, 10**6)


def _example(name: str):
    spec = importlib.util.spec_from_file_location(f"_rs_{name}", ROOT / "examples" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _prove(spec, plan, timeout_s: float = 120):
    return prove(build_problem(spec, plan, path="mutant.py", sha256="0" * 64), timeout_s=timeout_s)


def _refuted_naming(report, axis: str, rank: int):
    """NOT EQUIVALENT, and the counterexample's notes name ``axis=rank`` as the odd rank."""
    assert report.verdict == "NOT EQUIVALENT", (report.verdict,
                                                [(g.name, g.reason) for g in report.open_goals][:3])
    cx = report.counterexample
    notes = [n for n in cx.notes if n.startswith("asymmetric ranks:")]
    assert notes and f"asymmetric ranks: {axis}={rank} " in notes[0], cx.render()
    return cx


# -- the mutants --------------------------------------------------------------------------------

def eps_on_one_rank(model, axis: str, n: int, rank: int):
    """The model with RMSNorm epsilon ``ODD_EPS`` on coordinate ``rank`` of ``axis`` only."""
    eps = [ODD_EPS if r == rank else EPS for r in range(n)]
    return dataclasses.replace(model, config=dataclasses.replace(
        model.config, norm_eps=ops.rank_const(axis, eps)))


@contextlib.contextmanager
def attention_scale_on_one_rank(axis: str, n: int, rank: int, factor=Fraction(2)):
    """Plan traces inside this block scale the attention scores by ``factor`` on one rank of
    ``axis`` (the spec, traced with :class:`SpecContext`, keeps ``1/sqrt(HD)``)."""
    orig = llama_models.attention

    def attention(p, x, c, d, ctx):
        if isinstance(ctx, SpecContext):
            return orig(p, x, c, d, ctx)
        h = ctx.enter_tp(x, d)
        q = ops.einsum(h, p["wq"], out=(d.B, d.S, d.KVH, d.G, d.HD))
        k = ops.einsum(h, p["wk"], out=(d.B, d.S, d.KVH, d.HD))
        v = ops.einsum(h, p["wv"], out=(d.B, d.S, d.KVH, d.HD))
        q = ops.rope(q, d.S, d.HD, d.HD_half, c.rope_theta)
        k = ops.rename(ops.rope(k, d.S, d.HD, d.HD_half, c.rope_theta), d.S, d.T)
        v = ops.rename(v, d.S, d.T)
        scores = ops.einsum(q, k, out=(d.B, d.KVH, d.G, d.S, d.T))
        odd = ops.rank_const(axis, [factor if r == rank else 1 for r in range(n)])
        scores = scores * ops.rsqrt(ops.dim_size(d.HD)) * odd          # <- the mutation
        probs = ops.softmax(scores, d.T, mask=ops.causal_mask(d.S, d.T))
        o = ops.einsum(probs, v, out=(d.B, d.S, d.KVH, d.G, d.HD))
        return ctx.exit_tp(ops.einsum(o, p["wo"], out=(d.B, d.S, d.H)), d)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(llama_models, "attention", attention)
        mp.setattr(moe_models, "attention", attention)
        yield


def loss_scale_on_one_microbatch(plan, k: int, m: int, factor=Fraction(2)):
    """The plan with micro-batch ``m``'s backward seed scaled by ``factor`` (of ``k``)."""
    fwd = plan.forward

    def forward(p, data):
        out = fwd(p, data)
        w = ops.rank_const("mb", [factor if i == m else 1 for i in range(k)])
        return dataclasses.replace(out, backward=out.backward * w)

    return dataclasses.replace(plan, forward=forward)


def stage_schedule(plan, s: int, edit):
    """The pipeline plan with stage ``s``'s events replaced by ``edit(events)``."""
    pipe = plan.schedule
    new = Pipeline(pipe.stages, pipe.schedule.with_stage(s, edit(pipe.schedule.stages[s])),
                   pipe.axis)
    return dataclasses.replace(plan, forward=new.forward, schedule=new)


@contextlib.contextmanager
def ep_rank_routes_to_the_other_block(rank: int):
    """Inside this block the expert-parallel dispatcher of ep rank ``rank`` swaps the two expert
    blocks it sends (its tokens meet the other rank's experts; ep = 2)."""
    from spec_lang.collectives import all_to_all_region
    from spec_lang.cp import permute
    ep_mod = sys.modules["spec_lang.plans.expert_parallel"]

    class Swapped(ep_mod.ExpertParallel):
        def dispatch(self, xe, d):
            if self.s.token_order is not None:
                xe = permute(xe, d.S, self.s.token_order)
            odd = ops.rank_const("ep", [int(r == rank) for r in range(2)])
            xe = xe * (1 - odd) + permute(xe, d.E, (1, 0)) * odd           # <- the mutation
            return all_to_all_region(xe, "ep", d.E, d.B)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ep_mod, "ExpertParallel", Swapped)
        yield


# -- debug Llama and MoE plans --------------------------------------------------------------------

def test_megatron_debug_dp_rank_with_another_epsilon():
    ex = _example("llama_debug_megatron")
    from spec_lang.plans import megatron
    plan = megatron(eps_on_one_rank(ex.model, "dp", 2, 1), tp=2, dp=2, microbatches=2,
                    layers=ex.layer_plan)
    _refuted_naming(_prove(ex.spec, plan), "dp", 1)


def test_megatron_debug_tp_rank_with_another_attention_scale():
    ex = _example("llama_debug_megatron")
    from spec_lang.plans import megatron
    with attention_scale_on_one_rank("tp", 2, 1):
        r = _prove(ex.spec, megatron(ex.model, tp=2, dp=2, microbatches=2, layers=ex.layer_plan))
    _refuted_naming(r, "tp", 1)


def test_megatron_debug_one_microbatch_with_another_loss_scale():
    ex = _example("llama_debug_megatron")
    _refuted_naming(_prove(ex.spec, loss_scale_on_one_microbatch(ex.plan, 2, 1)), "mb", 1)


def test_zero1_debug_dp_rank_with_another_epsilon():
    ex = _example("llama_debug_zero1")
    from spec_lang.plans.sharded_dp import zero1
    _refuted_naming(_prove(ex.spec, zero1(eps_on_one_rank(ex.model, "dp", 2, 1), dp=2)), "dp", 1)


def test_3d_debug_dp_rank_with_another_epsilon():
    ex = _example("llama_debug_3d")
    from spec_lang.plans.torchtitan import torchtitan_3d
    plan = torchtitan_3d(eps_on_one_rank(ex.model, "dp", 2, 1), dp=2, tp=2, pp=2, microbatches=2)
    _refuted_naming(_prove(ex.spec, plan), "dp", 1)


@pytest.mark.parametrize("edit,ratio", [
    (lambda ev: list(ev) + [scale(Fraction(1, 2))], 0.5),      # stage 1 halves its buffer
    (lambda ev: [ev[0], ev[1], reset(), *ev[2:]], None),       # stage 1 drops micro-batch 0
])
def test_3d_debug_one_stage_with_another_schedule_is_refuted(edit, ratio):
    ex = _example("llama_debug_3d")
    r = _prove(ex.spec, stage_schedule(ex.plan, 1, edit))
    assert r.verdict == "NOT EQUIVALENT"
    cx = r.counterexample
    assert cx.schedule is not None and cx.schedule["stage"] == 1, cx.render()
    assert "pp stage 1 holds" in cx.render()
    if ratio is not None:
        assert cx.ratio == pytest.approx(ratio)


def test_3d_debug_one_stage_in_gpipe_order_is_equivalent():
    """Stage 1 runs GPipe (F0 F1 B0 B1) while stage 0 runs 1F1B: the buffer is still the sum of
    both micro-batches' gradients and no hook reads it early, so the arithmetic is the same:
    legitimately EQUIVALENT (the symmetry the proof needs is of the values, not of the order)."""
    ex = _example("llama_debug_3d")
    gp = lambda ev: [F(0), F(1), B(0), B(1)]   # noqa: E731
    assert [str(e) for e in ex.plan.schedule.schedule.stages[1]] == ["F0", "B0", "F1", "B1"]
    r = _prove(ex.spec, stage_schedule(ex.plan, 1, gp))
    assert r.verdict == "EQUIVALENT", [(g.name, g.reason) for g in r.open_goals][:3]


def test_moe_ep_dp_rank_with_another_epsilon():
    ex = _example("moe_debug_ep")
    from spec_lang.plans.expert_parallel import expert_parallel
    plan = expert_parallel(eps_on_one_rank(ex.model, "dp", 2, 1), dp=2, ep=2)
    _refuted_naming(_prove(ex.spec, plan), "dp", 1)


def test_moe_ep_rank_routing_to_another_expert_block():
    ex = _example("moe_debug_ep")
    from spec_lang.plans.expert_parallel import expert_parallel
    with ep_rank_routes_to_the_other_block(1):
        r = _prove(ex.spec, expert_parallel(ex.model, dp=2, ep=2))
    _refuted_naming(r, "ep", 1)


# -- Llama-3-8B at real widths, 2 layers, larger meshes ---------------------------------------------

def _llama8b(dp, tp, k, mutate_model=None, mutate_plan=None):
    from dataclasses import replace

    from spec_lang.models import LLAMA3_8B, llama
    from spec_lang.plans import colwise, megatron, replicated, rowwise
    model = llama(replace(LLAMA3_8B, n_layers=2, batch=dp * k))
    d = model.dims
    layers = {"attention_norm": replicated(), "attn.wq": colwise(d.KVH),
              "attn.wk": colwise(d.KVH), "attn.wv": colwise(d.KVH), "attn.wo": rowwise(d.KVH),
              "ffn_norm": replicated(), "mlp.w1": colwise(d.F), "mlp.w3": colwise(d.F),
              "mlp.w2": rowwise(d.F)}
    pm = mutate_model(model) if mutate_model else model
    plan = megatron(pm, tp=tp, dp=dp, microbatches=k, layers=layers)
    return model.spec(AdamW()), mutate_plan(plan) if mutate_plan else plan


def test_llama8b_dp8_last_rank_with_another_epsilon():
    spec, plan = _llama8b(8, 8, 2, mutate_model=lambda m: eps_on_one_rank(m, "dp", 8, 7))
    cx = _refuted_naming(_prove(spec, plan), "dp", 7)
    assert cx.reduced_binding["dp"] == 8 and cx.reduced_binding["tp"] == 8   # real mesh sizes


def test_llama8b_tp8_rank5_with_another_attention_scale():
    with attention_scale_on_one_rank("tp", 8, 5):
        spec, plan = _llama8b(2, 8, 1)
        r = _prove(spec, plan)
    _refuted_naming(r, "tp", 5)


def test_llama8b_microbatch_3_of_4_with_another_loss_scale():
    spec, plan = _llama8b(2, 2, 4, mutate_plan=lambda p: loss_scale_on_one_microbatch(p, 4, 3))
    _refuted_naming(_prove(spec, plan), "mb", 3)


@pytest.mark.slow
def test_llama8b_dp64_last_rank_with_another_epsilon(request):
    # about 15-20 s: the confirmation evaluates the diverging goals at dp 64 x mb 16 x tp 8
    if "slow" not in (request.config.getoption("-m") or ""):
        pytest.skip("the dp64 confirmation: run with -m slow")
    spec, plan = _llama8b(64, 8, 16, mutate_model=lambda m: eps_on_one_rank(m, "dp", 64, 63))
    cx = _refuted_naming(_prove(spec, plan, timeout_s=600), "dp", 63)
    assert cx.reduced_binding["dp"] == 64 and cx.reduced_binding["mb"] == 16


# -- the refuter's mesh reduction ---------------------------------------------------------------------

def _roots(spec, plan):
    p = build_problem(spec, plan, path="x.py", sha256="0" * 64)
    return p, [t for g in p.goals for t in (g.expected, g.actual)]


def test_reduce_mesh_keeps_the_odd_rank_and_cuts_the_rest():
    p, roots = _roots(*_llama8b(64, 8, 16, mutate_model=lambda m: eps_on_one_rank(m, "dp", 64, 63)))
    mr = reduce_mesh(roots, p.binding)
    assert mr.reps["dp"] == (0, 1, 2, 63)                  # 4 divides 64; rank 63 is kept
    assert mr.mesh == {"dp": 4, "tp": 4, "mb": 4}
    assert mr.real_rank({"dp": 3, "tp": 1}) == {"dp": 63, "tp": 1}
    assert mr.real_constant(Fraction(1, 64)) == Fraction(1, 8192)     # 1/(dp tp mb)
    assert mr.real_constant(Fraction(1, 16)) is None                  # 1/(dp mb)? 1/(dp tp)?
    assert mr.real_constant(Fraction(1, 3)) == Fraction(1, 3)         # no size maps to it
    eps = {t.attrs[1] for t in walk(mr.roots) if t.op is Op.RANK_CONST and t.attrs[0] == "dp"}
    assert eps == {(EPS, EPS, EPS, ODD_EPS)}
    # the evaluation is flat in dp and mb: the same reduced program at dp 64 and dp 1024
    p2, roots2 = _roots(*_llama8b(1024, 8, 64))
    mr2 = reduce_mesh(roots2, p2.binding)
    assert mr2.mesh == {"dp": 4, "tp": 4, "mb": 4}
    assert eval_cost(mr2.roots, mr2.binding) < eval_cost(roots2, reduce_binding(roots2, p2.binding)) / 100


def _dp_mean_plan(n: int, scale):
    """A data-parallel plan on Mesh(dp=n) whose gradient average is ``scale() * all_reduce``."""
    from spec_lang import Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, real

    b, h = Dim("B", 4 * n), Dim("H", 4)

    def model(p, d):
        y = ops.einsum(d["x"], p["w"], out=(b,))
        return ops.sum(y * y) / ops.dim_size(b)

    spec = Spec(params={"w": (h,)}, data={"x": real(b, h)}, forward=model, optimizer=SGD())
    plan = Plan(mesh=Mesh(dp=n), placements={"x": {"dp": Shard(b)}},
                forward=lambda p, d: Loss(backward=model(p, d) * ops.axis_size("dp"),
                                          report=all_reduce(model(p, d), "dp")),
                reduce_grads=lambda name, g: all_reduce(g, "dp") * scale())
    return spec, plan


def test_a_literal_one_over_dp_is_generalised_and_proved():
    """``1/64`` written for ``1/|dp|``: the reduced mesh's program uses ``1/4``, no mismatch."""
    spec, plan = _dp_mean_plan(64, lambda: Fraction(1, 64))
    p, roots = _roots(spec, plan)
    mr = reduce_mesh(roots, p.binding)
    assert mr.mesh["dp"] == 4 and mr.constants == {Fraction(1, 64): Fraction(1, 4)}
    assert _prove(spec, plan).verdict == "EQUIVALENT"


def test_a_plan_right_only_at_the_real_size_is_not_refuted():
    """``(|dp| - 63) / |dp|`` is ``1/|dp|`` at dp 64 only: it differs on the reduced mesh, the
    confirmation at the real size finds no divergence, and the proof goes through."""
    spec, plan = _dp_mean_plan(64, lambda: (ops.axis_size("dp") - 63) / ops.axis_size("dp"))
    r = _prove(spec, plan)
    assert r.verdict == "EQUIVALENT", [(g.name, g.reason) for g in r.open_goals]


def test_a_wrong_literal_is_refuted_with_the_real_factor():
    spec, plan = _dp_mean_plan(64, lambda: Fraction(1, 32))
    r = _prove(spec, plan)
    assert r.verdict == "NOT EQUIVALENT"
    assert r.counterexample.ratio == pytest.approx(2.0)
    assert r.counterexample.reduced_binding["dp"] == 64


def test_a_permuted_dim_keeps_its_axes_at_real_size():
    ex = _example("llama_debug_cp")
    p, roots = _roots(ex.spec, ex.plan)
    mr = reduce_mesh(roots, p.binding, least=1)
    assert "cp" in mr.kept and "cp" not in mr.reps


# -- the rng obligation on a reduced mesh ------------------------------------------------------------

@pytest.mark.parametrize("kw,ok,phrase,tp", [
    (dict(tp=8, dp=8, sp=True, stream="tp+dp", seq=8), True, None, 4),
    (dict(tp=8, dp=8, sp=True, stream="tp", seq=8), False, "share one draw", 4),
    # replicas that draw differently get one symbol per tp rank (a RANK_CONST of 8 values):
    # tp keeps its real size
    (dict(tp=8, dp=1, stream="tp"), False, "replicas differ", 8),
    (dict(tp=8, dp=4, sp=True, stream="tp+dp", mb=4, seq=8), True, None, 4),
])
def test_rng_on_a_reduced_mesh_decides_like_the_real_mesh(kw, ok, phrase, tp):
    """The same verdict on the reduced mesh as on the real one (which is still enumerable here)."""
    from proofs.rng import check_rng, check_rng_reduced_mesh
    from tests.bugs.test_rng import mlp_problem

    p = mlp_problem(**kw)
    roots = [t for g in p.goals for t in (g.expected, g.actual)]
    real = check_rng(p.rng, reduce_binding(roots, p.binding), p.mesh)
    small = check_rng_reduced_mesh(p.rng, p.binding, p.mesh)
    assert small.sizes["tp"] == tp and small.modelled and small.checked
    assert real.ok == small.ok == ok, (real.collisions, small.collisions)
    if phrase:
        assert phrase in small.collisions[0]


@pytest.mark.parametrize("scale,factor", [
    (lambda: Fraction(1, 32), 2),                 # a literal 1/32 for 1/|dp| = 1/64
    (lambda: 1, 64),                              # a sum where the mean is meant
    (lambda: Fraction(1, 64), 1),                 # right
    (lambda: 1 / (ops.axis_size("dp") * ops.axis_size("dp")), Fraction(1, 64)),
])
def test_real_mesh_factor_from_reduced_meshes(scale, factor):
    """The factor at dp 64, read off dp 4 and dp 8 (a monomial in the axis sizes)."""
    from proofs.refute import real_mesh_factor

    p = build_problem(*_dp_mean_plan(64, scale), path="x.py", sha256="0" * 64)
    g = next(g for g in p.goals if g.name == "grad:w")
    assert real_mesh_factor(g, p.binding) == factor
