"""Pipeline parallelism and loop-carried gradient buffers (spec_lang/pipeline.py, schedules.py).

The buffer coefficients are the semantics of the accumulation loop: they are checked here
against a direct Python simulation of the loop (exact Fractions, one buffer per data-parallel
rank, collectives executed over the ranks), and the lowered terms against the evaluator.
"""

from __future__ import annotations

import random
from fractions import Fraction as Fr

import numpy as np
import pytest

from proofs.prover import prove
from spec_lang import (
    SGD, Axis, Dim, Loss, Mesh, Plan, PlanError, Shard, Spec, all_reduce, build_problem, index,
    mask, microbatches, ops,
)
from spec_lang.evaluate import evaluate
from spec_lang.pipeline import Accumulation, Pipeline, lower_buffer, stage
from spec_lang.schedules import (
    B as Bev, F as Fev, Event, accumulation_steps, collective_reads, arm_reduction_in_last_forward,
    buffer_after, collective, final_buffer, gpipe, interleaved_one_f_one_b, one_f_one_b,
    reduce_after_last_backward, reset, reset_on_length_change, scale, validate,
)
from spec_lang.tensor import Tensor, TraceContext, tracing
from spec_lang.term import Binding, DimSpec, Op, term

DP, PP, MB = Axis.DP, Axis.PP, Axis.MB


# -- the loop, simulated directly ---------------------------------------------------------------

def simulate(events, g, ranks):
    """Run the accumulation loop literally: ``g[m][r]`` is micro-batch m's gradient on dp rank
    r (a list of Fractions); returns each rank's final buffer."""
    n = len(g[0][0])
    buf = [[Fr(0)] * n for _ in range(ranks)]
    for e in events:
        if e.kind == "B":
            buf = [[x + y for x, y in zip(buf[r], g[e.mb][r])] for r in range(ranks)]
        elif e.kind == "scale":
            buf = [[e.factor * x for x in buf[r]] for r in range(ranks)]
        elif e.kind == "reset":
            buf = [[Fr(0)] * n for _ in range(ranks)]
        elif e.kind == "collective":
            red = [sum(buf[r][i] for r in range(ranks)) for i in range(n)]
            if e.op == "avg":
                red = [x / ranks for x in red]
            buf = [[(buf[r][i] if e.accumulate else 0) + red[i] for i in range(n)]
                   for r in range(ranks)]
    return buf


def from_coefficients(b, g, ranks):
    """The buffer as the coefficients say: sum over chains C of C(sum_m c_m g_m)."""
    n = len(g[0][0])
    out = [[Fr(0)] * n for _ in range(ranks)]
    for chain, coeffs in b.terms:
        x = [[sum(coeffs[m] * g[m][r][i] for m in range(len(g))) for i in range(n)]
             for r in range(ranks)]
        for _axis, op in chain:
            red = [sum(x[r][i] for r in range(ranks)) for i in range(n)]
            if op == "avg":
                red = [v / ranks for v in red]
            x = [list(red) for _ in range(ranks)]
        out = [[out[r][i] + x[r][i] for i in range(n)] for r in range(ranks)]
    return out


def random_events(rng, m):
    ev = []
    for k in range(m):
        ev.append(Event("F", k))
        for _ in range(rng.randint(0, 2)):
            kind = rng.choice(["scale", "reset", "collective", "collective"])
            if kind == "scale":
                ev.append(Event("scale", factor=Fr(rng.randint(-3, 4), rng.randint(1, 4))))
            elif kind == "reset":
                ev.append(Event("reset"))
            else:
                ev.append(Event("collective", axis="dp", op=rng.choice(["sum", "avg"]),
                                accumulate=rng.random() < 0.4))
        ev.append(Event("B", k))
    if rng.random() < 0.5:
        ev.append(Event("collective", axis="dp", op="avg"))
    return ev


@pytest.mark.parametrize("seed", range(60))
def test_coefficients_match_a_direct_simulation_of_the_loop(seed):
    rng = random.Random(seed)
    m, ranks = rng.randint(1, 5), rng.randint(1, 3)
    ev = random_events(rng, m)
    g = [[[Fr(rng.randint(-9, 9)) for _ in range(3)] for _ in range(ranks)] for _ in range(m)]
    assert from_coefficients(buffer_after(ev, m), g, ranks) == simulate(ev, g, ranks)


@pytest.mark.parametrize("seed", range(20))
def test_every_prefix_is_the_simulation_of_that_prefix(seed):
    # a collective reads exactly the contributions in the buffer when it fires
    rng = random.Random(1000 + seed)
    m, ranks = rng.randint(2, 4), 2
    ev = random_events(rng, m)
    g = [[[Fr(rng.randint(-9, 9)) for _ in range(2)] for _ in range(ranks)] for _ in range(m)]
    for upto in range(len(ev) + 1):
        assert from_coefficients(buffer_after(ev, m, upto=upto), g, ranks) == \
            simulate(ev[:upto], g, ranks)


def test_b06_weights_are_the_loop_not_k_independent_steps():
    for n, k in [(2, 2), (3, 2), (2, 3)]:
        sch = accumulation_steps(one_f_one_b(2, n), k, end_of_step=[scale(Fr(1, n))])
        for s in range(2):
            c = final_buffer(sch, s).coefficients()
            # the trainer's 1/K is in the loss: buffer weights are 1/n^(K-k+1) for step k
            assert c == tuple(Fr(1, n ** (k - j)) for j in range(k) for _ in range(n))
    # K = 1 hides it: one division by n, equal weights
    sch = accumulation_steps(one_f_one_b(2, 2), 1, end_of_step=[scale(Fr(1, 2))])
    assert final_buffer(sch, 0).coefficients() == (Fr(1, 2), Fr(1, 2))


def test_b19_doubling_buffer_is_powers_of_two():
    for m in (2, 3, 4):
        ev = [Fev(0), Bev(0)]
        for k in range(1, m):
            ev += [Fev(k), collective(DP, "sum", accumulate=True), Bev(k)]
        b = buffer_after(ev, m)
        # over a 1-rank group the chains are the identity: the total weight of g_k is 2^(M-k)
        total = [sum(c[k] for _, c in b.terms) for k in range(m)]
        assert total == [2 ** (m - 1 - k) for k in range(m)]
        g = [[[Fr(k + 1)]] for k in range(m)]
        assert simulate(ev, g, 1) == [[sum(Fr(2 ** (m - 1 - k) * (k + 1)) for k in range(m))]]


def test_b18_prefix_reduction_on_stage_0_only():
    sch = arm_reduction_in_last_forward(one_f_one_b(2, 2), DP)
    (i, e, read), = collective_reads(sch, 0)
    assert i == 3 and e.kind == "collective" and read.describe() == "1*g0"     # a prefix
    assert collective_reads(sch, 1)[0][2].describe() == "1*g0 + 1*g1"
    assert final_buffer(sch, 0).describe() == "AR_avg[dp](1*g0) + 1*g1"
    assert final_buffer(sch, 1).describe() == "AR_avg[dp](1*g0 + 1*g1)"
    # the public report: 4 stages, 8 micro-batches, the reduction fires inside B4 on stage 0
    big = arm_reduction_in_last_forward(one_f_one_b(4, 8), DP)
    b0 = final_buffer(big, 0)
    assert b0.coefficients((("dp", "avg"),)) == tuple(Fr(int(m <= 4)) for m in range(8))
    assert b0.coefficients() == tuple(Fr(int(m > 4)) for m in range(8))
    assert final_buffer(big, 3).coefficients((("dp", "avg"),)) == (Fr(1),) * 8
    fixed = reduce_after_last_backward(one_f_one_b(4, 8), DP)
    for s in range(4):
        assert final_buffer(fixed, s).terms == (((("dp", "avg"),), (Fr(1),) * 8),)


def test_b21_resets_follow_the_length_pattern():
    def coeffs(lengths):
        sch = accumulation_steps(one_f_one_b(2, 1), len(lengths),
                                 start_of_step=reset_on_length_change(lengths))
        return [final_buffer(sch, s).coefficients() for s in range(2)]
    assert coeffs([3, 4]) == [(0, 1)] * 2
    assert coeffs([4, 4]) == [(1, 1)] * 2                # equal lengths hide it
    assert coeffs([3, 4, 4]) == [(0, 1, 1)] * 2
    assert coeffs([3, 4, 3]) == [(0, 0, 1)] * 2


# -- schedules ------------------------------------------------------------------------------------

@pytest.mark.parametrize("pp,m", [(1, 1), (2, 1), (2, 2), (2, 5), (4, 8), (3, 7)])
def test_gpipe_and_1f1b_are_executable(pp, m):
    for sch in (gpipe(pp, m), one_f_one_b(pp, m)):
        validate(sch)
        for ev in sch.stages:
            assert sorted((e.kind, e.mb) for e in ev) == \
                sorted([("F", k) for k in range(m)] + [("B", k) for k in range(m)])
    # 1F1B: the last stage alternates, stage s holds at most pp - s forwards in flight
    sch = one_f_one_b(pp, m)
    for s, ev in enumerate(sch.stages):
        live = peak = 0
        for e in ev:
            live += 1 if e.kind == "F" else -1
            peak = max(peak, live)
        assert peak == min(pp - s, m)


@pytest.mark.parametrize("pp,m,v", [(2, 2, 2), (2, 4, 2), (4, 8, 2), (2, 4, 3), (4, 4, 4)])
def test_interleaved_1f1b_is_executable(pp, m, v):
    sch = interleaved_one_f_one_b(pp, m, v)
    validate(sch)
    assert sch.chunks == v and all(len(ev) == 2 * m * v for ev in sch.stages)


def test_interleaved_order_matches_megatron():
    # pp=2, M=4, v=2: forwards in groups of pp micro-batches, chunk by chunk
    st0 = [str(e) for e in interleaved_one_f_one_b(2, 4, 2).stages[0]]
    assert st0[:5] == ["F0", "F1", "F0.1", "F1.1", "F2"]       # warm-up (pp-1)*2 + (v-1)*pp = 4
    assert st0[5] == "B0.1"                                     # first backward: last chunk


def test_interleaved_needs_a_multiple_of_pp():
    with pytest.raises(PlanError, match="multiple of pp"):
        interleaved_one_f_one_b(2, 3, 2)


def test_validate_rejects_missing_repeated_early_and_deadlocked_events():
    base = one_f_one_b(2, 2)
    with pytest.raises(PlanError, match="never runs B1"):
        validate(base.with_stage(0, [e for e in base.stages[0] if str(e) != "B1"]))
    with pytest.raises(PlanError, match="twice"):
        validate(base.with_stage(1, list(base.stages[1]) + [Bev(0)]))
    with pytest.raises(PlanError, match="before its forward"):
        validate(base.with_stage(1, [Bev(0), Fev(0), Fev(1), Bev(1)]))
    # stage 0 runs 1F1B, stage 1 GPipe: stage 0 waits for B0, stage 1 for F2
    mixed = one_f_one_b(2, 4).with_stage(1, gpipe(2, 4).stages[1])
    with pytest.raises(PlanError, match="deadlocks"):
        validate(mixed)


def test_scale_and_collective_take_exact_linear_data():
    with pytest.raises(PlanError, match="exact int or Fraction"):
        scale(0.5)
    with pytest.raises(PlanError, match="sum or avg"):
        collective(DP, "max")


def _toy_lowered(coeff_events, m, dp):
    """Evaluate lower_buffer for a gradient g_{r,m} = the row of x that dp rank r holds in
    micro-batch m (B = dp*m rows, H = 2)."""
    with tracing(TraceContext("plan", mesh={"dp": dp, "mb": m})):
        x = term(Op.INPUT, (), ("x", "data", "real"), (DimSpec("B"), DimSpec("H")))
        xs = term(Op.SHARD, (x,), ("B", "dp"), (DimSpec("B", ("dp",)), DimSpec("H")))
        xs = term(Op.SHARD, (xs,), ("B", "mb"), (DimSpec("B", ("dp", "mb")), DimSpec("H")))
        g = Tensor(term(Op.EINSUM, (xs,), (("H",),), (DimSpec("H"),)), "t:1")
        low = lower_buffer(buffer_after(coeff_events, m), g)
    vals = np.random.default_rng(1).integers(-9, 9, size=(dp * m, 2)).astype(float)
    out = evaluate([low.term], Binding({"B": dp * m, "H": 2, "dp": dp, "mb": m}), {"x": vals})
    g_list = [[[Fr(int(v)) for v in vals[r * m + k]] for r in range(dp)] for k in range(m)]
    return out[low.term], simulate(coeff_events, g_list, dp)


@pytest.mark.parametrize("case", range(4))
def test_lowered_terms_equal_the_simulated_loop(case):
    ev = [
        [Fev(0), Bev(0), Fev(1), Bev(1), collective(DP, "avg")],
        [Fev(0), Fev(1), Bev(0), collective(DP, "avg"), Bev(1)],               # B18 stage 0
        [Fev(0), Bev(0), Fev(1), collective(DP, "sum", accumulate=True), Bev(1),
         Fev(2), scale(Fr(1, 3)), Bev(2)],
        [Fev(0), Bev(0), reset(), Fev(1), Bev(1), Fev(2), Bev(2), scale(Fr(-2, 5))],
    ][case]
    m = max(e.mb for e in ev if e.mb is not None) + 1
    got, want = _toy_lowered(ev, m, 2)
    arr = got.transpose_to(("@dp", "H"))            # a replicated result has no @dp axis
    for r in range(2):
        assert np.allclose(arr[min(r, arr.shape[0] - 1)], [float(v) for v in want[r]]), \
            (arr, want)


# -- stages, transfers and tied parameters -------------------------------------------------------

Bd, S, H, Fd, V = Dim("B", 4), Dim("S", 2), Dim("H", 4), Dim("F", 4), Dim("V", 8)
TOKEN_DATA = {"tokens": index(Bd, S, range=V), "labels": index(Bd, S, range=V),
              "mask": mask(Bd, S)}
DATA_DP = {k: {DP: Shard(Bd)} for k in TOKEN_DATA}


def _ce_sum(logits, d):
    return ops.sum(d["mask"] * ops.cross_entropy_per_token(logits, d["labels"], V))


def _tied_spec():
    """Input embedding reused as the output projection (tied), two linear layers between."""
    def fwd(p, d):
        h = ops.tanh(ops.einsum(ops.embedding(d["tokens"], p["emb"], V), p["w0"],
                                out=(Bd, S, Fd)))
        h = ops.einsum(h, p["w1"], out=(Bd, S, H))
        return _ce_sum(ops.einsum(h, p["emb"], out=(Bd, S, V)), d) / ops.sum(d["mask"])
    return Spec(params={"emb": (V, H), "w0": (H, Fd), "w1": (Fd, H)}, data=TOKEN_DATA,
                forward=fwd, optimizer=SGD())


def _n_glob(d):
    return all_reduce(all_reduce(ops.sum(d["mask"]), MB), DP)


def _tied_plan(*, reduce_pp=True, send=True, schedule=None, v=1, dp_avg=True):
    def s0(p, d, io):
        h = ops.tanh(ops.einsum(ops.embedding(d["tokens"], p["emb"], V), p["w0"],
                                out=(Bd, S, Fd)))
        if send:
            io.send(h)

    def s_mid(p, d, io):
        io.send(io.recv())                                  # an empty virtual stage

    def s1(p, d, io):
        h = ops.einsum(io.recv(), p["w1"], out=(Bd, S, H))
        s_mb = _ce_sum(ops.einsum(h, p["emb"], out=(Bd, S, V)), d)
        return Loss(backward=ops.axis_size(DP) * s_mb / _n_glob(d),
                    report=all_reduce(s_mb, DP) / _n_glob(d))

    def reduce(name, g):
        if name == "emb" and reduce_pp:
            g = all_reduce(g, PP)                           # the embedding group {first, last}
        return all_reduce(g, DP, "avg") if dp_avg else g

    stages = [stage(s0, ["emb", "w0"])] + [stage(s_mid, []) for _ in range(2 * v - 2)] + \
        [stage(s1, ["w1", "emb"])]
    pipe = Pipeline(stages, schedule=schedule or one_f_one_b(2, 2))
    m = pipe.schedule.microbatches
    return Plan(mesh=Mesh(dp=2, pp=2), forward=pipe.forward, schedule=pipe, placements=DATA_DP,
                reduce_grads=reduce, microbatches=microbatches(m, Bd))


def test_tied_embedding_reduced_over_the_stage_group_is_proved():
    r = prove(build_problem(_tied_spec(), _tied_plan()), timeout_s=60)
    assert r.verdict == "EQUIVALENT", [(g.name, g.reason) for g in r.open_goals()]


def test_tied_embedding_without_the_stage_reduction_is_refuted():
    r = prove(build_problem(_tied_spec(), _tied_plan(reduce_pp=False)), timeout_s=60)
    assert r.verdict == "NOT EQUIVALENT"
    assert r.counterexample.goal == "grad:emb"
    assert r.counterexample.rank.get("pp") is not None       # the stages hold different parts


def test_tied_embedding_under_interleaved_1f1b():
    sch = interleaved_one_f_one_b(2, 2, 2)
    ok = prove(build_problem(_tied_spec(), _tied_plan(schedule=sch, v=2)), timeout_s=60)
    assert ok.verdict == "EQUIVALENT", [(g.name, g.reason) for g in ok.open_goals()]
    bad = prove(build_problem(_tied_spec(), _tied_plan(schedule=sch, v=2, reduce_pp=False)),
                timeout_s=60)
    assert bad.verdict == "NOT EQUIVALENT" and bad.counterexample.goal == "grad:emb"


def test_stage_local_gradients_of_a_tied_parameter_add_up():
    plan = _tied_plan()
    pipe = plan.schedule
    assert pipe.holders("emb") == [0, 1] and pipe.owner("emb") is None
    assert pipe.owner("w0") == 0 and pipe.owner("w1") == 1
    assert list(pipe.stage_grads(1, {"emb": 1, "w0": 2, "w1": 3})) == ["w1"]


def test_missing_send_is_a_plan_error():
    with pytest.raises(PlanError, match="never calls send\\(\\) \\(missing send\\)"):
        build_problem(_tied_spec(), _tied_plan(send=False))


def test_transfer_and_ownership_errors():
    spec = _tied_spec()

    def plan_with(stages, **kw):
        pipe = Pipeline(stages, schedule=one_f_one_b(2, 2))
        return Plan(mesh=kw.get("mesh", Mesh(dp=2, pp=2)), forward=pipe.forward, schedule=pipe,
                    placements=DATA_DP, microbatches=microbatches(kw.get("m", 2), Bd))

    def s0(p, d, io):
        io.send(ops.tanh(ops.einsum(ops.embedding(d["tokens"], p["emb"], V), p["w0"],
                                    out=(Bd, S, Fd))))

    def s1(p, d, io):
        h = ops.einsum(io.recv(), p["w1"], out=(Bd, S, H))
        return _ce_sum(ops.einsum(h, p["emb"], out=(Bd, S, V)), d) / _n_glob(d)

    def s1_twice(p, d, io):
        io.recv()
        return s1(p, d, io)

    def s1_no_recv(p, d, io):
        return ops.sum(d["mask"]) * ops.sum(p["w1"]) * ops.sum(p["emb"])

    with pytest.raises(PlanError, match="does not hold"):         # emb not listed on stage 1
        build_problem(spec, plan_with([stage(s0, ["emb", "w0"]), stage(s1, ["w1"])]))
    with pytest.raises(PlanError, match="on no pipeline stage"):
        build_problem(spec, plan_with([stage(s0, ["emb"]), stage(s1, ["w1", "emb"])]))
    with pytest.raises(PlanError, match="receives twice"):
        build_problem(spec, plan_with([stage(s0, ["emb", "w0"]),
                                       stage(s1_twice, ["w1", "emb"])]))
    with pytest.raises(PlanError, match="never calls recv"):
        build_problem(spec, plan_with([stage(s0, ["emb", "w0"]),
                                       stage(s1_no_recv, ["w1", "emb"])]))
    with pytest.raises(PlanError, match="'pp' axis"):
        build_problem(spec, plan_with([stage(s0, ["emb", "w0"]), stage(s1, ["w1", "emb"])],
                                      mesh=Mesh(dp=2)))
    with pytest.raises(PlanError, match="microbatches\\(4\\)"):
        build_problem(spec, plan_with([stage(s0, ["emb", "w0"]), stage(s1, ["w1", "emb"])],
                                      m=4))
    with pytest.raises(PlanError, match="virtual stages"):
        Pipeline([stage(s0, ["emb", "w0"])], schedule=one_f_one_b(2, 2))
    pipe = Pipeline([stage(s0, ["emb", "w0"]), stage(s1, ["w1", "emb"])],
                    schedule=one_f_one_b(2, 2))
    with pytest.raises(PlanError, match="would be ignored"):
        build_problem(spec, Plan(mesh=Mesh(dp=2, pp=2), forward=lambda p, d: None,
                                 schedule=pipe, placements=DATA_DP,
                                 microbatches=microbatches(2, Bd)))


def test_accumulation_without_pipeline_matches_plain_microbatches():
    """Accumulation([F0 B0 F1 B1]) is the plain mb all-reduce: both prove."""
    spec = _tied_spec()

    def fwd(p, d):
        h = ops.tanh(ops.einsum(ops.embedding(d["tokens"], p["emb"], V), p["w0"],
                                out=(Bd, S, Fd)))
        h = ops.einsum(h, p["w1"], out=(Bd, S, H))
        s_mb = _ce_sum(ops.einsum(h, p["emb"], out=(Bd, S, V)), d)
        return Loss(backward=ops.axis_size(DP) * s_mb / _n_glob(d),
                    report=all_reduce(s_mb, DP) / _n_glob(d))

    acc = Accumulation([Fev(0), Bev(0), Fev(1), Bev(1), collective(DP, "avg")], microbatches=2)
    plan = Plan(mesh=Mesh(dp=2), forward=fwd, schedule=acc, placements=DATA_DP,
                microbatches=microbatches(2, Bd))
    assert prove(build_problem(spec, plan), timeout_s=60).verdict == "EQUIVALENT"


def test_accumulation_dtype_reaches_the_buffer_terms():
    from spec_lang.term import walk

    plan = _tied_plan()
    plan = Plan(mesh=plan.mesh, forward=plan.forward, schedule=plan.schedule,
                placements=DATA_DP, reduce_grads=plan.reduce_grads,
                microbatches=microbatches(2, Bd, accum_dtype="bf16"))
    prob = build_problem(_tied_spec(), plan)
    g = next(x for x in prob.goals if x.name == "grad:w0")
    assert any(t.op is Op.CAST and t.attrs == ("bf16",) for t in walk(g.actual))


def test_stage_code_reading_the_pp_coordinate_is_rejected():
    spec = _tied_spec()

    def s0(p, d, io):
        h = ops.tanh(ops.einsum(ops.embedding(d["tokens"], p["emb"], V), p["w0"],
                                out=(Bd, S, Fd)))
        io.send(h * ops.rank_const(PP, [1, 2]))           # stage-dependent: unsound to compose

    def s1(p, d, io):
        h = ops.einsum(io.recv(), p["w1"], out=(Bd, S, H))
        return _ce_sum(ops.einsum(h, p["emb"], out=(Bd, S, V)), d) / _n_glob(d)

    pipe = Pipeline([stage(s0, ["emb", "w0"]), stage(s1, ["w1", "emb"])],
                    schedule=one_f_one_b(2, 2))
    plan = Plan(mesh=Mesh(dp=2, pp=2), forward=pipe.forward, schedule=pipe,
                placements=DATA_DP, microbatches=microbatches(2, Bd))
    with pytest.raises(PlanError, match="depends on the 'pp' coordinate"):
        build_problem(spec, plan)
