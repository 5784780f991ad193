"""CASES.md section 8, randomness (B35): dropout draws named by (stream, offset).

The plan is accepted only when position -> (stream, offset) is injective and consistent and the
keep probability is the spec's (proofs/rng.py); a collision is NOT EQUIVALENT with the two
global positions that share a draw. Mutants vary the mesh (tp=4, dp, micro-batches), the stream
(default, forked on the wrong axis, re-seeded) and p.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from proofs.prover import prove
from proofs.reduction import reduce_binding
from proofs.rng import check_rng
from spec_lang import (
    SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, build_problem, copy_to_tp_region,
    gather_from_sp_region, gather_from_tp_region, microbatches, ops, real,
    reduce_from_tp_region, reduce_scatter_to_sp_region,
)
from spec_lang.rng import RngStream, model_parallel_rng
from tests.bugs.cases import assert_certified, assert_refuted

TP, DP = Axis.TP, Axis.DP


def test_b35_default_stream_under_sp_is_refuted():
    cx = assert_refuted("B35", goal="loss")
    text = cx.render()
    # the counterexample names two global positions sharing one draw: rows 0 and 1 (S = 2)
    assert "dropout 'hidden' position (B=0, S=0, H=0) (on rank (tp=0)) and dropout 'hidden' " \
           "position (B=0, S=1, H=0) (on rank (tp=1)) share one draw: stream (seed 1234) " \
           "offset 0" in text, text


def test_b35_tp_rank_stream_is_certified(tmp_path):
    report = assert_certified("B35", tmp_path)
    assert any(a.startswith("rng: dropout draws are renamed") for a in report.assumptions)


# -- generalisation: an MLP stack with dropout, varied meshes and streams ----------------------------
P = Fraction(1, 10)


def mlp_problem(*, tp=1, dp=1, sp=False, layers=1, stream="tp", mb=None, plan_p=P, seq=4,
                reseed=False):
    """Spec: ``layers`` residual MLP blocks with hidden dropout; plan: Megatron TP (+SP) x DP.

    ``stream``: "default" (seed, same on every rank), "tp" (model-parallel tracker), "dp"
    (forked on dp), "tp+dp"; ``reseed``: each dropout call gets a freshly seeded generator."""
    B, S, H, F = Dim("B", 2 * dp * (mb or 1)), Dim("S", seq), Dim("H", 2), Dim("F", 2 * tp)
    params = {f"l{i}.{w}": dims for i in range(layers)
              for w, dims in (("w1", (H, F)), ("w2", (F, H)))}

    def stack(p, x, enter, leave, rngs, pp):
        for i in range(layers):
            h = ops.silu(ops.einsum(enter(x), p[f"l{i}.w1"], out=(B, S, F)))
            y = leave(ops.einsum(h, p[f"l{i}.w2"], out=(B, S, H)))
            x = x + ops.dropout(y, pp, rngs(i), name=f"l{i}.hidden")
        return x

    spec = Spec(params=params, data={"x": real(B, S, H), "t": real(B, S, H)},
                forward=lambda p, d: ops.sum(stack(p, d["x"], lambda v: v, lambda v: v,
                                                   lambda i: None, P) * d["t"]),
                optimizer=SGD())
    fork = {"default": (), "tp": ("tp",), "dp": ("dp",), "tp+dp": ("tp", "dp")}[stream]
    one = RngStream(1234, fork=fork)
    rngs = (lambda i: RngStream(1234, fork=fork)) if reseed else (lambda i: one)
    if sp:
        enter = lambda v: gather_from_sp_region(v, S, TP)  # noqa: E731
        leave = lambda v: reduce_scatter_to_sp_region(v, S, TP)  # noqa: E731
        head = lambda v: gather_from_tp_region(v, S, TP)  # noqa: E731
    else:
        enter = lambda v: copy_to_tp_region(v, TP)  # noqa: E731
        leave = lambda v: reduce_from_tp_region(v, TP)  # noqa: E731
        head = lambda v: v  # noqa: E731

    def forward(p, d):
        local = ops.sum(head(stack(p, d["x"], enter, leave, rngs, plan_p)) * d["t"])
        if dp == 1 and not mb:
            return local
        axes = ([DP] if dp > 1 else []) + (["mb"] if mb else [])
        report = local
        for a in axes:
            report = all_reduce(report, a) if a == DP else report
        return Loss(backward=local, report=report)

    pl = {f"l{i}.{w}": {TP: Shard(F)} for i in range(layers) for w in ("w1", "w2")}
    data = {}
    if dp > 1:
        data = {DP: Shard(B)}
    if sp:
        data = {**data, TP: Shard(S)}
    pl.update({"x": data, "t": {DP: Shard(B)} if dp > 1 else {}})
    plan = Plan(mesh=Mesh(dp=dp, tp=tp), forward=forward, placements=pl,
                reduce_grads=(lambda n, g: all_reduce(g, DP)) if dp > 1 else None,
                microbatches=microbatches(mb, B) if mb else None)
    return build_problem(spec, plan)


CASES = [  # (id, kwargs, equivalent?, expected phrase in the rng note)
    ("sp-tp4-default", dict(tp=4, sp=True, layers=2, stream="default"), False, "share one draw"),
    ("sp-tp4-tracker", dict(tp=4, sp=True, layers=2, stream="tp"), True, None),
    ("tp-replicated-forked", dict(tp=2, stream="tp"), False, "replicas differ"),
    ("tp-replicated-default", dict(tp=2, stream="default"), True, None),
    ("dp-unforked", dict(dp=2, tp=1, stream="default"), False, "share one draw"),
    ("dp-forked", dict(dp=2, tp=1, stream="dp"), True, None),
    ("dp-sp-tp-forked-only", dict(dp=2, tp=2, sp=True, stream="tp"), False, "share one draw"),
    ("dp-sp-both-forked", dict(dp=2, tp=2, sp=True, stream="tp+dp"), True, None),
    ("reseeded-per-layer", dict(tp=2, sp=True, layers=2, stream="tp", reseed=True), False,
     "share one draw"),
    ("microbatches-advance", dict(tp=2, sp=True, stream="tp", mb=2), True, None),
    ("wrong-p", dict(tp=2, sp=True, stream="tp", plan_p=Fraction(1, 5)), False, "keep probability"),
]


@pytest.mark.parametrize("cid,kw,equivalent,phrase", CASES, ids=[c[0] for c in CASES])
def test_dropout_streams(cid, kw, equivalent, phrase):
    pr = build_problem_cached(cid, kw)
    report = prove(pr, timeout_s=60)
    if equivalent:
        assert report.verdict == "EQUIVALENT", (cid, [(g.name, g.reason) for g in report.goals])
        return
    assert report.verdict == "NOT EQUIVALENT", (cid, report.verdict)
    cx = report.counterexample
    assert any(abs(s - p) > 1e-9 * max(1.0, abs(s)) for _, s, p in cx.values), cx.render()
    assert any(phrase in n for n in cx.notes), (cid, cx.notes)


_CACHE: dict[str, object] = {}


def build_problem_cached(cid, kw):
    if cid not in _CACHE:
        _CACHE[cid] = mlp_problem(**kw)
    return _CACHE[cid]


@pytest.mark.parametrize("cid,kw,equivalent,phrase", CASES, ids=[c[0] for c in CASES])
def test_exhaustive_map_agrees_with_the_mask_terms(cid, kw, equivalent, phrase):
    """The check enumerates the true map at reduced and real sizes; the mask terms are always a
    renaming of it, and collisions exist exactly for the refuted stream choices."""
    pr = build_problem_cached(cid, kw)
    roots = [t for g in pr.goals for t in (g.expected, g.actual)]
    for b in (reduce_binding(roots, pr.binding), pr.binding):
        r = check_rng(pr.rng, b, pr.mesh)
        assert r.checked and r.modelled, r.why
        assert (not r.collisions) == equivalent, r.collisions


def test_sp_default_stream_collision_positions_at_tp4():
    """Rows i and i + S/tp share a draw when every TP rank uses offsets 0.. of one stream."""
    pr = mlp_problem(tp=4, sp=True, stream="default", seq=4)
    r = check_rng(pr.rng, pr.binding, pr.mesh)
    assert r.collisions[0].startswith("dropout 'l0.hidden' position (B=0, S=0, H=0) (on rank "
                                      "(dp=0, tp=0)) and dropout 'l0.hidden' position (B=0, S=1,"
                                      " H=0) (on rank (dp=0, tp=1)) share one draw"), r.collisions


def test_plan_dropout_needs_a_stream():
    from spec_lang import PlanError

    with pytest.raises(PlanError, match="needs rng=RngStream"):
        B, H = Dim("B", 2), Dim("H", 2)
        spec = Spec(params={"w": (H,)}, data={"x": real(B, H)},
                    forward=lambda p, d: ops.sum(ops.dropout(d["x"] * p["w"], P)),
                    optimizer=SGD())
        build_problem(spec, Plan(mesh=Mesh(dp=1),
                                 forward=lambda p, d: ops.sum(ops.dropout(d["x"] * p["w"], P))))


def test_model_parallel_rng_is_megatrons_offset():
    s = model_parallel_rng(1234)
    assert (s.seed, s.fork) == (1234 + 2718, ("tp",))


def test_masks_without_stream_records_are_never_equivalent():
    """The renaming is only justified by the rng check: a problem whose dropout records are
    missing is UNKNOWN, never EQUIVALENT."""
    import dataclasses

    from spec_lang import load
    from tests.bugs.cases import BUGS

    pr = load(BUGS / "B35_fixed.py")
    r = prove(dataclasses.replace(pr, rng=()), timeout_s=30)
    assert r.verdict == "UNKNOWN" and r.goals[0].reason.startswith("rng: dropout masks without")


def test_exhaustive_check_names_replica_disagreement():
    pr = mlp_problem(tp=2, stream="tp")
    r = check_rng(pr.rng, pr.binding, pr.mesh)
    assert r.collisions[0].startswith(
        "replicas differ: dropout 'l0.hidden' position (B=0, S=0, H=0) is drawn as stream "
        "(seed 1234, tp=0) offset 0 on rank (dp=0, tp=0) but as stream (seed 1234, tp=1) "
        "offset 0 on rank (dp=0, tp=1)"), r.collisions


# -- the debug Llama with Megatron's hidden dropout (after wo and w2), TP + SP ----------------------
def llama_dropout_problem(tp: int, stream: str):
    """Debug Llama (2 layers; 4 kv heads so that tp = 4 divides them), hidden dropout after each
    row-parallel output (Megatron's bias-dropout-add), Megatron TP + SP on Mesh(tp)."""
    import dataclasses
    import runpy

    from spec_lang import Spec, reduce_scatter_to_sp_region
    from spec_lang.models import DEBUG, llama
    from spec_lang.models.llama import SpecContext
    from tests.bugs.cases import ROOT

    m = runpy.run_path(str(ROOT / "tests/spec_lang/plans/debug_tp_sp.py"))
    model = llama(dataclasses.replace(DEBUG, n_kv_heads=4))
    rng = {"default": RngStream(1234), "tp": model_parallel_rng(1234)}[stream]

    class SpecDropout(SpecContext):
        def exit_tp(self, x, d):
            return ops.dropout(x, P)

    class MegatronSPDropout(m["MegatronSP"]):
        def exit_tp(self, x, d):
            return ops.dropout(reduce_scatter_to_sp_region(x, d.S, TP), P, rng)

    spec = Spec(params=model.params, data=model.data, optimizer=SGD(lr=Fraction(1, 100)),
                forward=lambda p, data: model.forward(p, data, SpecDropout()))
    good = m["plan"]
    plan = Plan(mesh=Mesh(tp=tp), placements=good.placements, reduce_grads=good.reduce_grads,
                forward=lambda p, data: model.forward(p, data, MegatronSPDropout()))
    return build_problem(spec, plan)


@pytest.mark.parametrize("tp", [2, 4])
def test_llama_sp_hidden_dropout_default_stream_is_refuted(tp):
    pr = llama_dropout_problem(tp, "default")
    r = prove(pr, timeout_s=60)
    assert r.verdict == "NOT EQUIVALENT", r.verdict
    assert any("share one draw: stream (seed 1234)" in n for n in r.counterexample.notes)
    assert any(abs(s - p) > 1e-9 * max(1.0, abs(s)) for _, s, p in r.counterexample.values)
    assert len({rec.name for rec in pr.rng if rec.side == "plan"}) == 4  # 2 layers x (attn, mlp)


@pytest.mark.parametrize("tp", [2, 4])
def test_llama_sp_hidden_dropout_tracker_is_proved(tp):
    r = prove(llama_dropout_problem(tp, "tp"), timeout_s=300)
    assert r.verdict == "EQUIVALENT", [(g.name, g.reason) for g in r.goals if g.status != "proved"]


def test_checker_recheck_rejects_an_equivalent_verdict_with_collisions():
    """check-certificate re-runs the rng check on the re-traced plan: an EQUIVALENT certificate
    for a plan whose draws collide is rejected; the fixed plan passes."""
    import json

    from proofs.errors import CertificateError
    from proofs.problem_data import parse_problem_data, problem_to_data, to_problem
    from proofs.retrace import _recheck_rng
    from spec_lang import load
    from tests.bugs.cases import BUGS

    def as_retraced(pb):  # what the checker gets back from its tracing child: data
        doc = json.loads(json.dumps(problem_to_data(pb)))
        return to_problem(parse_problem_data(doc), pb.path, pb.source_sha256)

    for view in (lambda pb: pb, as_retraced):
        with pytest.raises(CertificateError, match="share one draw"):
            _recheck_rng({"verdict": "EQUIVALENT"}, view(load(BUGS / "B35_buggy.py")))
        _recheck_rng({"verdict": "NOT EQUIVALENT"}, view(load(BUGS / "B35_buggy.py")))
        _recheck_rng({"verdict": "EQUIVALENT"}, view(load(BUGS / "B35_fixed.py")))


def test_reseeded_generator_with_another_p_is_unknown_not_equivalent():
    """Two calls share draws (a re-seeded generator) but with different p: the masks are
    correlated, not identical, which the terms do not model: UNKNOWN, never EQUIVALENT."""
    B, S, H = Dim("B", 2), Dim("S", 2), Dim("H", 2)

    def f(p, d, r1, r2):
        y = ops.dropout(d["x"] * p["w"], Fraction(1, 10), r1, name="a")
        return ops.sum(ops.dropout(y, Fraction(1, 5), r2, name="b"))

    spec = Spec(params={"w": (H,)}, data={"x": real(B, S, H)},
                forward=lambda p, d: f(p, d, None, None), optimizer=SGD())
    plan = Plan(mesh=Mesh(dp=1), forward=lambda p, d: f(p, d, RngStream(1), RngStream(1)))
    r = prove(build_problem(spec, plan), timeout_s=30)
    assert r.verdict == "UNKNOWN"
    assert r.goals[0].reason.startswith("rng: the dropout mask terms are not a renaming")
