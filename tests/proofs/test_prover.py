"""The prover pipeline on small hand-built goals: proved, refuted (with the ratio), unknown."""

from fractions import Fraction

from proofs.prover import prove
from spec_lang.term import DimSpec, Op, term

from terms import SIZES, add, all_reduce, const, einsum, inp, mul, part, problem, row_parallel, \
    shard, unary


def test_row_parallel_matmul_is_proved_by_rewriting():
    spec, plan = row_parallel()
    r = prove(problem([("loss", "loss", spec, plan)], SIZES))
    assert r.verdict == "EQUIVALENT"
    assert r.counts["rewrite"] == 1 and r.counts["open"] == 0
    assert r.rule_counts["allreduce-einsum-split"] >= 1


def test_missing_sum_over_tp_is_refuted_with_ratio_one_half():
    spec, plan = row_parallel()
    half = mul(const(Fraction(1, 2)), plan)
    r = prove(problem([("grad:layers.0.mlp.w2", "grad", spec, half)], SIZES))
    assert r.verdict == "NOT EQUIVALENT"
    cx = r.counterexample
    assert cx.goal == "grad:layers.0.mlp.w2" and cx.tensor == "layers.0.mlp.w2"
    assert abs(cx.ratio - 0.5) < 1e-9
    assert "a sum over tp is missing or averaged" in cx.ratio_text
    assert "= 0.500 x spec" in cx.ratio_text
    assert cx.values and cx.site.endswith(":1")


def test_dropped_all_reduce_reports_the_rank_and_values_differ():
    x, w = inp("x", "B", "F", kind="data"), inp("w", "F", "H")
    spec = einsum(("B", "H"), x, w)
    local = einsum(("B", "H"), shard(x, "F", "tp"), shard(w, "F", "tp"))  # no all-reduce
    r = prove(problem([("loss", "loss", spec, local)], SIZES))
    assert r.verdict == "NOT EQUIVALENT"
    assert set(r.counterexample.rank) == {"tp"}
    assert r.counterexample.ratio is None
    assert "values differ" in r.counterexample.ratio_text


def test_first_divergence_is_the_loss_then_gradients_before_updates():
    spec, plan = row_parallel()
    bad = mul(const(2), plan)
    goals = [("layers.0.w", "param", spec, bad), ("grad:layers.0.w", "grad", spec, bad),
             ("loss", "loss", spec, plan)]
    r = prove(problem(goals, SIZES))
    assert r.counterexample.goal == "grad:layers.0.w"
    assert r.counterexample.others == ["layers.0.w"]
    assert "2 = |tp|" in r.counterexample.hint or "2 = |dp|" in r.counterexample.hint


def test_micro_batch_factor_hint():
    spec, plan = row_parallel()
    r = prove(problem([("loss", "loss", spec, mul(const(Fraction(1, 4)), plan))],
                      {**SIZES, "mb": 4}))
    assert "K=4 micro-batches" in r.counterexample.hint


def test_distributivity_is_a_certified_rational_identity():
    x, y, z = inp("x", "B"), inp("y", "B"), inp("z", "B")
    r = prove(problem([("loss", "loss", mul(x, add(y, z)), add(mul(x, y), mul(x, z)))], SIZES))
    assert r.verdict == "EQUIVALENT" and r.counts["rewrite"] == 1
    assert any(s["kind"] == "cas" for s in r.steps.steps)


def test_max_commutes_by_z3_with_a_recorded_query():
    x, y = inp("x", "B"), inp("y", "B")
    spec = term(Op.MAXIMUM, (x, y), (), (DimSpec("B"),))
    plan = term(Op.MAXIMUM, (y, x), (), (DimSpec("B"),))
    r = prove(problem([("loss", "loss", spec, plan)], SIZES))
    assert r.verdict == "EQUIVALENT"
    assert r.counts["smt"] == 1
    smt = [s for s in r.steps.steps if s["kind"] == "smt"]
    assert smt and smt[0]["answer"] == "unsat" and "(assert" in smt[0]["smt2"]


def test_exp_homomorphism_is_unknown_with_a_reason_never_equivalent():
    a, b = inp("a", "B"), inp("b", "B")
    spec = unary(Op.EXP, add(a, b))
    plan = mul(unary(Op.EXP, a), unary(Op.EXP, b))
    r = prove(problem([("loss", "loss", spec, plan)], SIZES))
    assert r.verdict == "UNKNOWN"
    (g,) = r.open_goals
    assert "normal forms differ" in g.reason and "z3" in g.reason


def test_timeout_gives_unknown_never_equivalent():
    x, y, z = inp("x", "B"), inp("y", "B"), inp("z", "B")
    mx = term(Op.MAXIMUM, (x, y), (), (DimSpec("B"),))
    r = prove(problem([("loss", "loss", mx, term(Op.MAXIMUM, (y, x), (), (DimSpec("B"),)))],
                      SIZES), timeout_s=1e-9)
    assert r.verdict == "UNKNOWN"
    assert r.open_goals and r.open_goals[0].reason


def test_identical_obligations_are_proved_once_and_reused():
    goals = []
    for i in range(4):
        spec, plan = row_parallel(f"x{i}", f"layers.{i}.w")
        goals.append((f"grad:layers.{i}.w", "grad", spec, plan))
    r = prove(problem(goals, SIZES))
    assert r.verdict == "EQUIVALENT"
    assert r.counts == {"total": 4, "rewrite": 1, "smt": 0, "reused": 3, "open": 0, "refuted": 0}


def test_partial_sum_lineage_and_jobs_pool():
    x = inp("x", "B", "H")
    spec = x
    plan = all_reduce(part(x, "dp"), "dp")
    y, z, w = inp("y", "B"), inp("z", "B"), inp("w", "B")
    mx = lambda a, b: term(Op.MAXIMUM, (a, b), (), (DimSpec("B"),))  # noqa: E731
    goals = [("loss", "loss", spec, plan),
             ("grad:a", "grad", mx(y, z), mx(z, y)),
             ("grad:b", "grad", mx(mul(y, w), z), mx(z, mul(w, y)))]
    r = prove(problem(goals, SIZES), jobs=2)
    assert r.verdict == "EQUIVALENT"
    assert r.counts["smt"] == 2


def _mean_literal_plan(tmp_path, literal):
    """tiny_dp_tp with the loss's 1/|B| written as a literal in the plan only."""
    from pathlib import Path

    src = (Path(__file__).parent / "plans" / "tiny_dp_tp.py").read_text()
    src = src.replace(
        "def forward(p, d):\n    loss = model(",
        "def plan_model(p, d, enter, exit_):\n"
        "    h = ops.silu(ops.einsum(enter(d['x']), p['w1'], out=(B, F)))\n"
        "    y = exit_(ops.einsum(h, p['w2'], out=(B, H)))\n"
        f"    return ops.sum(y * y) * ops.const(Fraction({literal}))\n\n\n"
        "def forward(p, d):\n    loss = plan_model(")
    src = "from fractions import Fraction\n" + src
    path = tmp_path / "mean_literal.py"
    path.write_text(src)
    return path


def test_a_literal_real_size_proves_equivalent(tmp_path):
    # 1/8 is 1/|B| at the real size B = 8: equal to the spec over the reals, but not at a
    # reduced B; the refuter's divergence there is only a note (B keeps its real size under
    # confirmation: DIM_SIZE(B)), and the goal is normalised and proved (issue 10, family 7)
    from spec_lang import load

    r = prove(load(_mean_literal_plan(tmp_path, "1, 8")), timeout_s=30)
    assert r.verdict == "EQUIVALENT", [(g.name, g.reason) for g in r.open_goals]
    assert r.counterexample is None


def test_a_literal_wrong_size_is_still_refuted_at_the_real_size(tmp_path):
    from spec_lang import load

    # 1/32 may encode |H| x |F| (4 x 8), so the reduced-size mismatch is re-checked with H and F
    # at their real sizes, where it is still 1/32 against the spec's 1/|B| = 1/8
    r = prove(load(_mean_literal_plan(tmp_path, "1, 32")), timeout_s=300)
    assert r.verdict == "NOT EQUIVALENT"
    assert abs(r.counterexample.ratio - 0.25) < 1e-9


def test_confirmation_binding_keeps_size_dependent_dims_real():
    from proofs.confirm import confirmation_binding
    from spec_lang.term import Binding

    x = inp("x", "H")
    mean = mul(einsum((), x), unary(Op.RECIP, term(Op.DIM_SIZE, (), ("H",), ())))
    lit = mul(einsum((), x), const(Fraction(1, 16)))
    real = Binding({"H": 16, "F": 6, "tp": 2})
    g = problem([("loss", "loss", mean, lit)], dict(real)).goals
    b, why = confirmation_binding(g, real, real.replace(H=4))
    assert b["H"] == 16 and "the literal 1/16 may encode a size of H" in why[0]   # Rule L
    wrong = mul(einsum((), x), const(Fraction(1, 3)))       # 3 is no product of sizes or counts
    g = problem([("loss", "loss", mean, wrong)], dict(real)).goals
    assert confirmation_binding(g, real, real.replace(H=4)) == (real.replace(H=4), [])
    s = problem([("loss", "loss", einsum((), x), einsum((), mul(x, const(2))))], dict(real)).goals
    b, why = confirmation_binding(s, real, real.replace(H=4))
    assert (b["H"], why) == (4, [])     # a sum of a row function: a divergence at H=4 is real
