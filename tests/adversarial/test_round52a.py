"""Adversarial round 52a: the z3 query's "cancelling difference" filter (``proofs.smt._cancels``,
commit 54fea4d) and the prover's skip of a congruence split on unequal constants.

a1-a4 call ``_cancels`` directly (whenever it says 0, z3 must prove the difference valid);
a5-a12 forge an EQUIVALENT certificate (``smt`` steps regenerated with ``build_query``) for
small wrong or partial plans in ``plans/round52a`` and assert the checker rejects it;
a13 compares the prover's verdicts on those plans with main's (recorded in ATTEMPTS.md).
"""

from __future__ import annotations

import gc
import random
from fractions import Fraction
from pathlib import Path

import pytest
import z3

from proofs.checker import check_certificate
from proofs.errors import CertificateError
from proofs.kernel import NodeTable
from proofs.smt import _cancels, build_query
from tests.adversarial.forge import certificate, forge_smt, write

PLANS = Path(__file__).resolve().parent / "plans" / "round52a"
X, Y = z3.Reals("x y")
I, J = z3.Ints("i j")
F = z3.Function("tanh", z3.RealSort(), z3.RealSort())


def _valid_zero(d: z3.ArithRef) -> bool:
    s = z3.Solver()
    s.set("timeout", 5000)
    s.add(d != 0)
    return s.check() == z3.unsat


def _sub(*xs: z3.ArithRef) -> z3.ArithRef:
    """A raw n-ary ``-`` (the Python API only builds binary ones)."""
    ctx = xs[0].ctx
    arr = (z3.Ast * len(xs))(*[x.as_ast() for x in xs])
    return z3.ArithRef(z3.Z3_mk_sub(ctx.ref(), len(xs), arr), ctx)


def _uminus(x: z3.ArithRef) -> z3.ArithRef:
    return z3.ArithRef(z3.Z3_mk_unary_minus(x.ctx.ref(), x.as_ast()), x.ctx)


TRICKY = [  # (expression, is it identically 0?)
    (z3.ToReal(I / J) - z3.ToReal(I) / z3.ToReal(J), False),          # div vs /
    (z3.ToReal(I % 2) - z3.ToReal(I) + 2 * z3.ToReal(I / 2), False),   # mod, kept opaque
    (X ** 2 - X * X, True), (X ** 2 - Y * Y, False),
    (z3.ToReal(2 * I) - 2 * z3.ToReal(I), True),
    (z3.If(X > 0, X, -X) - X, False), (z3.If(X > 0, X + 1, X) - X - 1, False),
    (_sub(X, Y, X), False), (_sub(X, Y, _uminus(Y)), False), (_sub(X, X, Y, _uminus(Y)), True),
    (X * _uminus(Y) + X * Y, True), (X * _uminus(_uminus(Y)) + X * Y, False),
    (_uminus(X * _uminus(Y)) - X * Y, True), (_uminus(X * _uminus(Y)) + X * Y, False),
    (z3.Sqrt(2) * z3.Sqrt(2) - 2, True), (z3.Sqrt(2) - z3.Sqrt(3), False),
    (z3.Sqrt(2) * X - z3.Sqrt(2) * Y, False),
    (X / 0 - Y / 0, False), (0 * (1 / X) - 0, True), (X * (1 / X) - 1, False),
    (z3.ToReal(I) - X, False), (z3.Real("i") - z3.ToReal(I), False),
    (F(X + Y) - F(Y + X), False), (F(X) * F(Y) - F(Y) * F(X), True),
    (z3.RealVal(Fraction(1, 3)) * 3 * X - X, True), (z3.RealVal(Fraction(1, 3)) * 3 * X - Y, False),
]


@pytest.mark.parametrize("som", [None, False, True])
def test_a1_tricky_differences(som):
    # a1: Int/Real mixing, div/mod, powers, If, n-ary -, unary - in products, radicals, /0
    for e, zero in TRICKY:
        d = e if som is None else z3.simplify(e, som=som)
        if _cancels(d):
            assert zero and _valid_zero(e), (e, d)


def _rand(rng: random.Random, depth: int) -> z3.ArithRef:
    atoms = [X, Y, F(X), F(X + Y), 1 / X, z3.If(X > Y, X, Y), z3.ToReal(I), X ** 2,
             z3.Sqrt(2), z3.ToReal(I / 2)]
    k = rng.randrange(8 if depth else 2)
    if k == 0:
        return rng.choice(atoms)
    if k == 1:
        return z3.RealVal(Fraction(rng.randint(-3, 3), rng.randint(1, 3)))
    a, b = _rand(rng, depth - 1), _rand(rng, depth - 1)
    return [a + b, a * b, a - b, _sub(a, b, _rand(rng, depth - 1)), _uminus(a) * b,
            z3.If(a > b, a, b)][k - 2]


def test_a2_random_differences_that_cancel_are_valid():
    # a2: random pairs of expressions (and a-a'' built to cancel): every cancel is valid
    # (the round ran 3000 pairs, > 300 cancels; CI runs 400 of them, about 3 s idle)
    rng = random.Random(52)
    hits = 0
    for _ in range(400):
        a = _rand(rng, 3)
        b = rng.choice([_rand(rng, 3), z3.simplify(a), z3.simplify(a, som=True), a * 1 + 0])
        for d in (a - b, z3.simplify(a - b, som=True), z3.simplify(a - b)):
            if _cancels(d):
                hits += 1
                assert _valid_zero(a - b), (a, b, d)
    assert hits > 20


def test_a3_atom_ids_after_garbage_collection():
    # a3: atoms only referenced from inside d (their Python wrappers collected) keep
    # distinct ids; contexts other than the default one (build_query has its own)
    for n in range(6):      # (each full collection walks the suite's heap: ~0.4 s)
        ctx = z3.Context() if n % 2 else z3.main_ctx()
        g = z3.Function(f"g{n}", z3.RealSort(ctx), z3.RealSort(ctx))
        d = g(z3.Real(f"u{n}", ctx)) - g(z3.Real(f"v{n}", ctx))
        gc.collect()
        junk = [z3.Real(f"w{n}_{k}", ctx) for k in range(50)]  # noqa: F841 -- churn ids
        assert not _cancels(z3.simplify(d, som=True))
        assert not _cancels(d)


def test_a4_bool_ite_and_int_numerals_are_atoms():
    # a4: an Int numeral factor (not a rational value for is_rational_value) stays an atom
    assert not _cancels(z3.ToReal(2 * I) - z3.ToReal(3 * I))
    assert not _cancels(z3.ToReal(I * 2) - 2 * z3.ToReal(I)) or _valid_zero(
        z3.ToReal(I * 2) - 2 * z3.ToReal(I))


FORGED = ["p01_tanh_additive", "p02_exp_square", "p03_sqrt_square_real", "p04_maximum",
          "p05_where", "p06_x_over_x", "p07_cancel_undefined", "p08_zero_times_recip",
          "p10_sqrt2_wrong"]


@pytest.mark.parametrize("name", FORGED)
def test_a5_a12_forged_smt_step_is_rejected(tmp_path, name):
    # a5-a12 (+ p10): the difference is atoms _cancels keeps opaque, or cancels only
    # where a denominator is nonzero; the forged smt steps are the checker's own text
    plan = PLANS / f"{name}.py"
    cert = certificate(plan, tmp_path / "genuine.json")
    assert cert["verdict"] != "EQUIVALENT"
    forged = forge_smt(cert)
    t = NodeTable.from_json(forged["nodes"])
    for s in forged["steps"]:
        if s["kind"] == "smt" and s["lhs"] != s["rhs"]:
            q = build_query(t, s["lhs"], s["rhs"], s["binding"])
            if name in ("p07_cancel_undefined", "p08_zero_times_recip"):
                continue  # the difference is 0 as a polynomial: definedness must reject
            assert not q.trivial, name
    with pytest.raises(CertificateError):
        check_certificate(write(tmp_path / "forged.json", forged), plan_path=plan)


def test_a7_a8_difference_cancels_but_a_side_is_undefined():
    # the filter does drop these (the answer is "unsat" without z3): the checker's
    # definedness rule is what rejects the forgery (test_a5_a12 p07, p08)
    t_d = z3.simplify((Y + 1 / X - 1 / X) - Y, som=True)
    assert (z3.is_rational_value(t_d) and t_d.as_fraction() == 0) or _cancels(t_d)


@pytest.mark.parametrize("name,verdict", [("p09_sqrt2_const", "EQUIVALENT"),
                                          ("p11_mask_over_sum", "EQUIVALENT"),
                                          ("p10_sqrt2_wrong", "UNKNOWN")])
def test_a13_prover_verdicts_equal_mains(tmp_path, name, verdict):
    cert = certificate(PLANS / f"{name}.py", tmp_path / "c.json")
    assert cert["verdict"] == verdict
    if verdict == "EQUIVALENT":
        res = check_certificate(tmp_path / "c.json", plan_path=PLANS / f"{name}.py")
        assert res.verdict == "EQUIVALENT"
