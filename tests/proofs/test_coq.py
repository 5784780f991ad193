"""Certificates checked by Coq's kernel (issue 17, docs/coq.md).

Without coqc: the rule-lemma table against the checker's rule table (a rule without a Coq lemma
must be listed in ``RULES_WITHOUT_LEMMA``, and a rule that gains one must leave the list), the
exporter's constant reader against the checker's (``proofs/exact_numbers.py``), and
``check-certificate --coq`` without coqc (exit 3, how to install it). With coqc (``slow``: the
library build alone is ~50 s of CPU; they skip without coqc, saying so): the library compiles,
two hand-made certificates (``_small``, ``_moves``: one instance of most rules with a Coq
checker) are Coq-checked end to end, and certificates edited to use a rule outside
its guard are rejected *by Coq*.
"""

from __future__ import annotations

import copy
import re
import shutil
from fractions import Fraction
from pathlib import Path

import pytest
import sympy
from hypothesis import given
from hypothesis import strategies as st

from proofs import checker_rules
from tests.proofs import coq_certs
from proofs.coq_constants import parse_const
from proofs.coq_export import export_certificate, rule_codes
from proofs.exact_numbers import decode_number, encode_number
from rewriting import RULES

# The rules of proofs/checker_rules.py that have no Coq checker and lemma yet (their steps are
# exported as hypotheses and reported as not Coq-checked). Empty since the sixth round (gelu-def,
# the unit-dim rules and einsum-components): the test fails when a new rule arrives without a
# lemma (list it here until it has one), and when a rule listed here gains one.
RULES_WITHOUT_LEMMA: frozenset[str] = frozenset()


def test_every_rule_has_a_coq_lemma_or_is_a_listed_gap() -> None:
    codes = rule_codes()
    checker = set(checker_rules.RULES)
    assert {r.name for r in RULES} <= checker
    assert set(codes) <= checker, f"Rules.v names rules the checker does not know: {set(codes) - checker}"
    missing = checker - set(codes)
    assert missing == RULES_WITHOUT_LEMMA, (
        f"rules without a Coq lemma not listed: {sorted(missing - RULES_WITHOUT_LEMMA)}; "
        f"listed but now with a lemma: {sorted(RULES_WITHOUT_LEMMA - missing)}")
    assert len(codes) == 94 and len(set(codes.values())) == len(codes)


# -- the exporter's constant reader agrees with the checker's -----------------------------------
radical = st.builds(
    lambda c, fs: sympy.Rational(c.numerator, c.denominator) * sympy.Mul(
        *[sympy.Integer(b) ** sympy.Rational(a, d) for b, a, d in fs]),
    st.fractions(min_value=-50, max_value=50, max_denominator=40),
    st.lists(st.tuples(st.integers(2, 60), st.integers(1, 5), st.integers(2, 6)), max_size=3))


def _value(num) -> sympy.Expr:
    return sympy.Add(*[sympy.Rational(q.numerator, q.denominator) * sympy.Mul(
        *[sympy.Integer(b) ** sympy.Rational(e.numerator, e.denominator) for b, e in rad])
        for q, rad in num])


@given(st.lists(radical, min_size=1, max_size=4).map(lambda xs: sympy.expand(sympy.Add(*xs))))
def test_constant_reader_agrees_with_the_checker(x: sympy.Expr) -> None:
    enc = encode_number(x)
    got = parse_const(enc)
    assert got is not None, enc
    assert sympy.simplify(_value(got) - sympy.sympify(decode_number(enc))) == 0


@pytest.mark.parametrize("bad", [
    {"q": "2/4"}, {"q": "1/0"}, {"q": "01/2"}, {"q": " 1/2"}, {"q": "1e3/1"}, {"q": 0.5},
    {"q": "1/2", "x": 1}, {"sympy": "Integer(2)"}, {"alg": [["1/2", [["1", "1/2"]]]]},
    {"alg": [["1/2", [["2", "3/2"]]]]}, {"alg": [["1/2", [["2", "2/4"]]]]}, {"alg": []},
    "1/2", 0.5, True, None,
])
def test_constant_reader_refuses_what_is_off_the_grammar(bad) -> None:
    assert parse_const(bad) is None


def test_constant_reader_reads_exact_values() -> None:
    assert parse_const({"q": "-3/4"}) == ((Fraction(-3, 4), ()),)
    assert parse_const(7) == ((Fraction(7), ()),)
    assert parse_const({"alg": [["1/16", [["2", "1/2"]]]]}) == \
        ((Fraction(1, 16), ((2, Fraction(1, 2)),)),)


_small = coq_certs.small


SMALL_OBLIGATIONS = ["neg", "pow", "size", "rank", "unit", "suminv", "maxinv", "einsum", "powmul",
                     "ident", "pointwise", "content", "scalarout", "lifteinsum", "mulcanon",
                     "mulflat", "mulconst", "addcanon", "renamescalar", "chunkscalar"]


def test_small_certificate_exports_without_opaque_steps() -> None:
    ex = export_certificate(_small())
    assert ex.obligations == SMALL_OBLIGATIONS
    assert ex.opaque == {} and ex.rule_steps == 20 and ex.nodes == 53 and ex.steps == 22
    assert "B = 4, tp = 1, cp = 3" in ex.source and "Theorem certificate" in ex.source


def test_unformalised_steps_are_exported_as_hypotheses() -> None:
    c = _small()
    c["steps"][0] = {"kind": "cas", "lhs": 1, "rhs": 3}
    # every rule of the registry has a Coq checker now: a name outside Rules.v's table stands
    # for a rule that would arrive without one
    c["steps"][1]["rule"] = "a-rule-without-a-lemma"
    ex = export_certificate(c)
    assert ex.opaque == {0: "a cas step (not formalised in Coq)",
                         1: "rule a-rule-without-a-lemma has no Coq checker"}


def test_mul_canon_merging_powers_without_a_sign_fact_is_exported_as_a_hypothesis() -> None:
    """x * x = x^2 needs no sign fact and goes to Coq's checker (RulesCanon.pexp); x^-1 * x = 1
    needs x != 0 (the rule's sign guard), which Coq's sign analysis (Signs.v) does not show for
    a real input: that step is kept back from Coq's checker, with the reason."""
    c = _small()
    B = [["B", []]]
    c["nodes"] += [["MUL", [0, 0], [], B],                               # 53: x x
                   ["POW", [0], [{"q": "-1/1"}], B],                     # 54: x^-1
                   ["MUL", [54, 0, 16], [], B]]                          # 55: x^-1 x y
    c["steps"].append({"kind": "rule", "rule": "mul-canon", "lhs": 53, "rhs": 21,
                       "subst": {"xs": {"nodes": [0, 0]}, "ys": {"nodes": [21]}}})
    c["steps"].append({"kind": "rule", "rule": "mul-canon", "lhs": 55, "rhs": 16,
                       "subst": {"xs": {"nodes": [54, 0, 16]}, "ys": {"nodes": [16]}}})
    ex = export_certificate(c)
    assert ex.opaque == {23: "rule mul-canon merges powers (a sign fact Coq's analysis does not "
                             "derive, proofs/coq/Signs.v)"}
    assert ex.rule_steps == 21


def test_add_canon_dropping_a_monomial_goes_to_coq_when_it_is_defined() -> None:
    """x - x + y = y drops x, defined everywhere: Coq's checker proves it (RulesMerge.v tests
    the guard). x^-1 - x^-1 + y = y needs x != 0 (the rule's sign guard), which Coq's analysis
    does not show for a real x: that step is kept back."""
    c = _small()
    B = [["B", []]]
    c["nodes"] += [["CONST", [], [{"q": "-1/1"}], []],                 # 53
                   ["MUL", [53, 0], [], B],                            # 54: -x
                   ["ADD", [0, 54, 16], [], B],                        # 55: x - x + y
                   ["POW", [0], [{"q": "-1/1"}], B],                   # 56: x^-1
                   ["MUL", [53, 56], [], B],                           # 57: -x^-1
                   ["ADD", [56, 57, 16], [], B]]                       # 58: x^-1 - x^-1 + y
    c["steps"].append({"kind": "rule", "rule": "add-canon", "lhs": 55, "rhs": 16,
                       "subst": {"xs": {"nodes": [0, 54, 16]}, "ys": {"nodes": [16]}}})
    c["steps"].append({"kind": "rule", "rule": "add-canon", "lhs": 58, "rhs": 16,
                       "subst": {"xs": {"nodes": [56, 57, 16]}, "ys": {"nodes": [16]}}})
    ex = export_certificate(c)
    assert ex.opaque == {23: "rule add-canon drops a monomial not shown defined (a sign fact "
                             "Coq's analysis does not derive, proofs/coq/Signs.v)"}
    assert ex.rule_steps == 21


_signs = coq_certs.signs
SIGNS_CHECKED = ["merge", "rsqrt", "powpow", "powfrac", "drop", "einsummerge"]
SIGNS_KEPT_BACK = ["sigmoid", "wmerge", "wpowpow", "wdrop"]


def _python_accepts(c: dict) -> list[bool]:
    """The Python checker's verdict on each rule step of ``c`` (with its sign analysis)."""
    from proofs.checker_rules import RULES as CHECKER, RuleMismatch, instantiate_and_match, \
        varying_table
    from proofs.checker_signs import Signs
    from proofs.kernel import NodeTable, decode_attr
    t = NodeTable.from_json(c["nodes"])
    out = []
    for st in c["steps"]:
        sub = {k: ("node", v["node"]) if isinstance(v, dict) and set(v) == {"node"} else
               ("nodes", tuple(v["nodes"])) if isinstance(v, dict) and set(v) == {"nodes"} else
               ("attr", decode_attr(v)) for k, v in st["subst"].items()}
        try:
            instantiate_and_match(CHECKER[st["rule"]], sub, t, c["binding"], st["lhs"],
                                  st["rhs"], varying_table(t), Signs(t))
            out.append(True)
        except RuleMismatch:
            out.append(False)
    return out


def test_sign_guarded_steps_go_to_coq_only_with_coqs_sign_facts() -> None:
    """The six steps whose guard Coq's analysis shows go to Coq's checkers; the Python analysis
    accepts sigmoid(w)^-1 sigmoid(w) w = w (sigmoid > 0) and Coq's does not: a hypothesis with
    the reason; the three steps on a real w fail the Python guard and are kept back too."""
    c = _signs()
    assert _python_accepts(c) == [True] * 7 + [False] * 3
    ex = export_certificate(c)
    assert ex.obligations == SIGNS_CHECKED + SIGNS_KEPT_BACK and ex.rule_steps == 6
    assert set(ex.opaque) == {6, 7, 8, 9}
    assert all("a sign fact Coq's analysis does not derive" in w for w in ex.opaque.values())


_moves = coq_certs.moves


MOVES_OBLIGATIONS = [o["name"] for o in _moves()["obligations"]]


def test_moves_certificate_exports_without_opaque_steps() -> None:
    ex = export_certificate(_moves())
    assert ex.obligations == MOVES_OBLIGATIONS and len(MOVES_OBLIGATIONS) == 27
    assert ex.opaque == {} and ex.rule_steps == 27 and ex.nodes == 88
    assert "sp = 1" in ex.source


# -- with coqc ---------------------------------------------------------------------------------
needs_coq = pytest.mark.skipif(shutil.which("coqc") is None,
                               reason="coqc not installed (apt-get install -y coq); CI installs it")


@pytest.fixture(scope="session")
def coq_cache(tmp_path_factory) -> Path:
    from proofs.coq_run import build_library
    root = tmp_path_factory.getbasetemp().parent / "shardproof-coq-cache"
    build_library(root)
    return root


@needs_coq
@pytest.mark.slow   # coqc: the library build (~35 s) and the check; CI runs the exporter's tests
def test_small_certificate_is_coq_checked(coq_cache: Path, tmp_path: Path) -> None:
    from proofs.coq_run import coq_check
    r = coq_check(_small(), cache=coq_cache, out_v=tmp_path / "small.v")
    assert r.status == {k: "checked" for k in SMALL_OBLIGATIONS}
    assert r.failed_steps == [] and r.claims == {}
    assert set(r.axioms) <= {"ClassicalDedekindReals.sig_forall_dec",
                             "ClassicalDedekindReals.sig_not_dec",
                             "FunctionalExtensionality.functional_extensionality_dep",
                             "Classical_Prop.classic",
                             # Coq's primitive 63-bit integers (the decoder)
                             "int", "lsr", "lsl", "land", "lor", "eqb", "leb", "add"}
    assert "FunctionalExtensionality.functional_extensionality_dep" in r.axioms
    assert (tmp_path / "small.v").read_text() == r.export.source


@needs_coq
@pytest.mark.slow
def test_the_decoder_reads_numbers_across_the_fast_paths_end(coq_cache: Path,
                                                              tmp_path: Path) -> None:
    """``Decode.rdN`` reads the first 55 bits in primitive integers, longer numbers in ``N``:
    values at and around that boundary, and a 665-bit one, come back exactly."""
    import subprocess

    from proofs.coq_export import _Stream
    from proofs.coq_run import build_library, coqc
    lib, _ = build_library(coq_cache)
    vals = [0, 1, 31, 32, 2**55 - 1, 2**55, 2**56 + 12345, 3**80, 10**200]
    s = _Stream()
    for v in vals:
        s.n(v)
    src = ("From Coq Require Import List NArith Uint63.\nFrom Shardproof Require Import Decode.\n"
           "Import ListNotations.\nDefinition ws : list int := ["
           + "; ".join(f"{w}%uint63" for w in s.words()) + "].\n"
           "Eval vm_compute in fst ((fix go (k : nat) (s : rd) : list N * rd := match k with "
           "O => ([], s) | S k' => let (v, s1) := rdN s in let (r, s2) := go k' s1 in "
           f"(v :: r, s2) end) {len(vals)} (Rd ws 0 0)).\n")
    (tmp_path / "Rd.v").write_text(src)
    r = subprocess.run([coqc(), "-q", "-Q", str(lib), "Shardproof", "Rd.v"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert [int(x) for x in re.findall(r"(\d+)%N", "".join(r.stdout.split()))] == vals


@needs_coq
@pytest.mark.slow
def test_an_opaque_step_is_a_claim_coq_reports(coq_cache: Path) -> None:
    from proofs.coq_run import coq_check
    c = _small()
    c["steps"][0] = {"kind": "cas", "lhs": 1, "rhs": 3}
    r = coq_check(c, cache=coq_cache)
    assert r.status["neg"] == "claims" and r.failed_steps == []
    assert r.claims == {"neg": ["node 1 == node 3 (step not Coq-checked)"]}
    assert sum(v == "checked" for v in r.status.values()) == len(r.status) - 1


def _mutant(edit) -> dict:
    c = copy.deepcopy(_small())
    edit(c)
    return c


MUTANTS = {
    # pow-one at exponent 2: POW(x, 2) = x is false
    "pow-one-exponent-2": (lambda c: c["nodes"][4][2].__setitem__(0, {"q": "2/1"}), "pow", 1),
    # dim-size with the wrong number
    "dim-size-wrong-size": (lambda c: c["nodes"][6][2].__setitem__(0, {"q": "5/1"}), "size", 2),
    # rank-const-uniform on values that differ
    "rank-const-not-uniform": (lambda c: c["nodes"][7][2].__setitem__(
        1, [{"q": "3/1"}, {"q": "2/1"}]), "rank", 4),
    # neg-mul with +1 for -1
    "neg-mul-wrong-sign": (lambda c: c["nodes"][2][2].__setitem__(0, {"q": "1/1"}), "neg", 0),
    # allreduce-unit-axis on an axis of size 2
    "allreduce-unit-axis-size-2": (lambda c: c["binding"].__setitem__("tp", 2), "unit", 6),
    # allreduce-sum-invariant with the wrong count
    "allreduce-sum-invariant-count": (lambda c: c["nodes"][11][2].__setitem__(0, {"q": "2/1"}),
                                      "suminv", 7),
    # allreduce-max-invariant on a value that varies over the axis
    "allreduce-max-invariant-varying": (lambda c: (
        c["steps"].append({"kind": "rule", "rule": "allreduce-max-invariant", "lhs": 15,
                           "rhs": 14, "subst": {"x": {"node": 14}, "a": "cp"}}),
        c["obligations"].append({"name": "vary", "kind": "loss", "method": "rewrite",
                                 "expected": 15, "actual": 14, "proof": 22})), "vary", 22),
    # einsum-canon with operands that are not a permutation
    "einsum-canon-not-a-permutation": (lambda c: c["nodes"][18].__setitem__(1, [16, 16]),
                                       "einsum", 9),
    # pow-mul at a fractional exponent: (x y)^(1/2) = x^(1/2) y^(1/2) fails for x, y < 0
    "pow-mul-fractional": (lambda c: [c["nodes"][k][2].__setitem__(0, {"q": "1/2"})
                                      for k in (20, 21, 22)], "powmul", 10),
    # einsum-identity whose einsum sums over B
    "einsum-identity-contracts": (lambda c: c["nodes"][26][2].__setitem__(0, []), "ident", 11),
    # einsum-pointwise whose einsum sums over B
    "einsum-pointwise-contracts": (lambda c: c["nodes"][27][2].__setitem__(0, []),
                                   "pointwise", 12),
    # add-content with 1/3 for 1/2
    "add-content-wrong-inverse": (lambda c: c["nodes"][29][2].__setitem__(0, {"q": "1/3"}),
                                  "content", 13),
    # einsum-scalar-out that takes out 1/2 where the operand has 2
    "einsum-scalar-out-wrong-scalar": (lambda c: c["nodes"][35].__setitem__(1, [29, 17]),
                                       "scalarout", 14),
    # lift-shard-einsum over the contracted dim: sum of one block for the block of the sum
    "lift-shard-einsum-contracted-dim": (lambda c: (c["nodes"][38][2].__setitem__(0, []),
                                                    c["nodes"][38].__setitem__(3, [])),
                                         "lifteinsum", 15),
    # mul-canon that drops a factor (2 y 2 for 2 x y)
    "mul-canon-drops-a-factor": (lambda c: c["nodes"][41].__setitem__(1, [16, 24, 24]),
                                 "mulcanon", 16),
    # mul-canon with the wrong constant: 2 (1/3) x = x
    "mul-canon-wrong-constant": (lambda c: c["nodes"][44][2].__setitem__(0, {"q": "1/3"}),
                                 "mulconst", 18),
    # add-canon with y + y for y + x
    "add-canon-wrong-sum": (lambda c: c["nodes"][46].__setitem__(1, [16, 16]), "addcanon", 19),
    # chunk-scalar-out with chunk 0 inside for chunk 1 outside
    "chunk-scalar-out-other-chunk": (lambda c: c["nodes"][51][2].__setitem__(2, 0),
                                     "chunkscalar", 21),
}


@needs_coq
@pytest.mark.slow
def test_every_mutant_is_rejected_by_coq_in_one_file(coq_cache: Path) -> None:
    """All the edits at once (they touch different obligations): exactly the edited steps and
    the steps built on them are rejected, and only the untouched obligation stays checked."""
    from proofs.coq_run import coq_check
    c = copy.deepcopy(_small())
    for edit, _ob, _step in MUTANTS.values():
        edit(c)
    r = coq_check(c, cache=coq_cache)
    assert sorted(r.failed_steps) == [0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15, 16, 18,
                                      19, 21, 22]
    assert {k for k, v in r.status.items() if v == "checked"} == {"maxinv", "mulflat",
                                                                   "renamescalar"}
    assert {k for k, v in r.status.items() if v == "not checked"} == \
        {ob for _e, ob, _s in MUTANTS.values()}


@needs_coq
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_rule_outside_its_guard_fails_in_coq(coq_cache: Path, name: str) -> None:
    from proofs.coq_run import coq_check
    edit, ob, step = MUTANTS[name]
    r = coq_check(_mutant(edit), cache=coq_cache)
    assert step in r.failed_steps
    assert r.status[ob] == "not checked"
    assert sum(v == "checked" for v in r.status.values()) == len(r.status) - 1


def _set(c: dict, node: int, k: int, v) -> None:
    c["nodes"][node][k] = v


# one edit per obligation of _moves (each a false equation), the step it breaks is that index
MOVES_MUTANTS = {
    "chunk": lambda c: (_set(c, 3, 2, ["H", 2, 0]),                 # chunk 0 for chunk 1
                        _set(c, 3, 3, [["B", ["dp"]], ["H", ["#0/2"]]])),
    "rename": lambda c: (_set(c, 8, 2, ["B", "tp"]),                # the block over tp
                         _set(c, 8, 3, [["B", ["tp"]], ["C", []]])),
    "renameblock": lambda c: _set(c, 10, 1, [1]),                   # y renamed for x
    "concat": lambda c: _set(c, 14, 1, [5, 13]),                    # the parts swapped
    "swap": lambda c: (_set(c, 19, 2, ["B", "tp"]),                 # B over tp, not dp
                       _set(c, 19, 3, [["B", ["tp"]], ["H", ["tp"]]])),
    "split": lambda c: _set(c, 20, 1, [0]),                         # a block of x for y's
    "einsummul": lambda c: _set(c, 24, 1, [0]),                     # sum_B x = sum_B x y
    "factorout": lambda c: _set(c, 28, 1, [27, 1]),                 # sum_B v y = v sum_B x
    "powconst": lambda c: _set(c, 33, 2, [{"q": "1/2"}]),           # 2^-2 = 1/2
    "aradd": lambda c: _set(c, 38, 1, [36, 36]),                    # x + x for x + y
    "arrename": lambda c: _set(c, 40, 1, [37]),                     # y renamed for x
    "archunk": lambda c: (_set(c, 43, 2, ["H", 2, 0]),              # chunk 0 for chunk 1
                          _set(c, 43, 3, [["B", []], ["H", ["#0/2"]]])),
    "rsdef": lambda c: _set(c, 45, 2, ["dp", "max"]),               # a max for the sum
    "bcast": lambda c: (c["steps"][13].__setitem__("rhs", 1),      # BROADCAST(x) = y
                        c["obligations"][13].__setitem__("actual", 1)),
    "agshard": lambda c: _set(c, 48, 2, ["tp", "B"]),               # gathered over tp
    "arshard": lambda c: _set(c, 50, 1, [37]),                      # the block of y's sum
    "a2a": lambda c: _set(c, 54, 1, [45]),                          # the block of a sum
    "permid": lambda c: _set(c, 55, 2, ["B", [1, 0]]),              # a swap is not identity
    "mulfactor": lambda c: _set(c, 60, 1, [1, 59]),                 # y for x outside
    "arswap": lambda c: _set(c, 64, 2, ["cp", "max"]),              # a max for a sum
    "permcompose": lambda c: _set(c, 67, 2, ["B", [1, 0]]),         # swap twice = swap
    "liftmax": lambda c: _set(c, 69, 1, [1]),                       # the max of y for x's
    "unitaxis": lambda c: c["binding"].__setitem__("sp", 2),       # |sp| = 2: half the sum
    "concatcontent": lambda c: _set(c, 75, 2, [{"q": "1/3"}]),      # 2 * 1/3 != 1
    "liftperm": lambda c: _set(c, 80, 2, ["B", [0, 1]]),            # y not permuted like x
    "scaledsum": lambda c: _set(c, 86, 1, [31, 0]),                 # 2 x for 2 y
}


@needs_coq
@pytest.mark.slow
def test_moves_certificate_is_coq_checked(coq_cache: Path) -> None:
    from proofs.coq_run import coq_check
    r = coq_check(_moves(), cache=coq_cache)
    assert r.status == {k: "checked" for k in MOVES_OBLIGATIONS}
    assert r.failed_steps == [] and r.claims == {}


@needs_coq
@pytest.mark.slow
def test_every_moves_mutant_is_rejected_by_coq_in_one_file(coq_cache: Path) -> None:
    """Each edit breaks its own obligation's rule step (outside the lemma's guard): Coq rejects
    exactly those steps; the obligation no edit touches (x x = x^2) stays checked."""
    from proofs.coq_run import coq_check
    c = copy.deepcopy(_moves())
    for edit in MOVES_MUTANTS.values():
        edit(c)
    r = coq_check(c, cache=coq_cache)
    broken = sorted(MOVES_OBLIGATIONS.index(n) for n in MOVES_MUTANTS)
    assert sorted(r.failed_steps) == broken
    assert {k for k, v in r.status.items() if v == "checked"} == {"mulpow"}
    assert {k for k, v in r.status.items() if v == "not checked"} == set(MOVES_MUTANTS)


@needs_coq
@pytest.mark.slow
def test_sign_guarded_steps_are_coq_checked(coq_cache: Path, monkeypatch) -> None:
    """The six steps with Coq's sign facts are checked with no claim; the four others are
    claims. Sent to Coq anyway (routing bypassed), those four are rejected by Coq's checkers:
    (w^-1)^-1 = w^1 and w + w^-1 - w^-1 = w hold in Coq's total semantics, but the checkers
    test the rules' guards (w != 0) as the Python checker does."""
    import proofs.coq_export
    from proofs.coq_run import coq_check
    r = coq_check(_signs(), cache=coq_cache)
    assert r.status == {**{k: "checked" for k in SIGNS_CHECKED},
                        **{k: "claims" for k in SIGNS_KEPT_BACK}}
    assert r.failed_steps == []
    monkeypatch.setattr(proofs.coq_export, "outside_coq_subset", lambda *a, **k: None)
    r = coq_check(_signs(), cache=coq_cache)
    assert r.failed_steps == [6, 7, 8, 9]
    assert r.status == {**{k: "checked" for k in SIGNS_CHECKED},
                        **{k: "not checked" for k in SIGNS_KEPT_BACK}}


_rounds3 = coq_certs.rounds3
ROUNDS3 = [o["name"] for o in _rounds3()["obligations"]]

# one edit per obligation of _rounds3 (each a false equation, or a guard that fails)
ROUNDS3_MUTANTS = {
    "expshift": lambda c: _set(c, 11, 2, [{"q": "-2/1"}]),          # exp(m)^-2 for exp(m)^-1
    "silu": lambda c: _set(c, 15, 1, [0, 14]),                      # x sigmoid(y)
    "maxunit": lambda c: c["binding"].__setitem__("sp", 2),         # two blocks, not one
    "powfrac": lambda c: _set(c, 20, 2, [{"q": "1/4"}]),            # 4^(-1/2) = 1/4
    "constfactor": lambda c: _set(c, 25, 1, [20, 24]),              # (w/16)^(-1/2) = w^(-1/2)/2
    "nested": lambda c: _set(c, 28, 1, [0, 1]),                     # w dropped
    "maxfactor": lambda c: _set(c, 33, 1, [10, 31]),                # exp(m) (x e^m + y e^m)
    "liftonehot": lambda c: _set(c, 34, 1, [2]),                    # the block of w, not lab
    "onehotout": lambda c: _set(c, 38, 3, [["B", []], ["V", ["dp"]]]),  # V over dp, not tp
}


def test_rounds3_certificate_is_an_instance_of_the_python_rules() -> None:
    assert _python_accepts(_rounds3()) == [True] * len(ROUNDS3)
    ex = export_certificate(_rounds3())
    assert ex.opaque == {} and ex.rule_steps == len(ROUNDS3) == 9


@needs_coq
@pytest.mark.slow
def test_rounds3_certificate_is_coq_checked_and_its_mutants_rejected(coq_cache: Path) -> None:
    from proofs.coq_run import coq_check
    r = coq_check(_rounds3(), cache=coq_cache)
    assert r.status == {k: "checked" for k in ROUNDS3} and r.failed_steps == []
    c = copy.deepcopy(_rounds3())
    for edit in ROUNDS3_MUTANTS.values():
        edit(c)
    r = coq_check(c, cache=coq_cache)
    assert sorted(r.failed_steps) == list(range(len(ROUNDS3)))
    assert r.status == {k: "not checked" for k in ROUNDS3}


_rounds4 = coq_certs.rounds4
ROUNDS4 = [o["name"] for o in _rounds4()["obligations"]]

# one edit per obligation of _rounds4 (each a false equation, or a guard that fails)
ROUNDS4_MUTANTS = {
    "armaxshard": lambda c: _set(c, 4, 2, ["tp", "sum"]),            # a sum of the block maxima
    "agcomm": lambda c: (_set(c, 9, 2, ["B", "tp"]),                 # B's block over tp
                         _set(c, 9, 3, [["B", ["tp"]], ["H", []]])),
    "permeinsum": lambda c: _set(c, 15, 2, ["B", [0, 1]]),           # not permuted back
    "permcontract": lambda c: _set(c, 16, 2, ["B", [0, 1]]),         # x and y in other orders
    "permmax": lambda c: _set(c, 20, 2, ["B", [0, 1]]),
    "permchunk": lambda c: _set(c, 21, 2, ["H", 2, 0]),              # chunk 0 for chunk 1
    "shardperm": lambda c: _set(c, 25, 1, [16]),                     # the block of P(y)
    "permrenameown": lambda c: _set(c, 28, 2, ["C", [0, 1]]),
    "permrename": lambda c: _set(c, 30, 1, [1]),                     # y renamed for x
    "permonehot": lambda c: _set(c, 36, 2, ["B", [0, 1]]),
    "permconcat": lambda c: _set(c, 40, 1, [23, 38]),                # the halves swapped
    "maxperm": lambda c: _set(c, 44, 1, [1]),                        # the max of y
    "topk": lambda c: _set(c, 47, 2, ["H", 1]),                      # top-1 for top-2
    "push": lambda c: _set(c, 52, 2, ["tp", "max"]),                 # a max pushed for a sum
    "permswap": lambda c: _set(c, 56, 2, ["B", [0, 1]]),
    "arperm": lambda c: _set(c, 58, 2, ["cp", "max"]),
    "arconcat": lambda c: _set(c, 62, 2, ["cp", "sum"]),
    "agunit": lambda c: c["binding"].__setitem__("sp", 2),          # two blocks, not one
    "rankconst": lambda c: _set(c, 68, 2, [{"q": "5/1"}]),           # 1 + 2 + 3 = 5
    "permtopk": lambda c: _set(c, 70, 2, ["B", [0, 1]]),
    "aragcomm": lambda c: _set(c, 72, 2, ["cp", "max"]),             # a max for the sum
    "shardshift": lambda c: _set(c, 75, 1, [1]),                     # y shifted for x
    "topkelig": lambda c: _set(c, 79, 1, [0, 0]),                    # x eligible for y
    "permtopkelig": lambda c: _set(c, 82, 2, ["B", [0, 1]]),
}


def test_rounds4_certificate_is_an_instance_of_the_python_rules() -> None:
    assert _python_accepts(_rounds4()) == [True] * len(ROUNDS4)
    ex = export_certificate(_rounds4())
    assert ex.opaque == {} and ex.rule_steps == len(ROUNDS4) == 24
    assert sorted(ROUNDS4_MUTANTS) == sorted(ROUNDS4)


def test_rounds4_mutants_are_false_or_outside_the_python_guards() -> None:
    """Each edit is rejected by the Python checker too (its step no longer an instance)."""
    for name, edit in ROUNDS4_MUTANTS.items():
        c = copy.deepcopy(_rounds4())
        edit(c)
        k = ROUNDS4.index(name)
        assert _python_accepts(c)[k] is False, name


@needs_coq
@pytest.mark.slow
def test_rounds4_certificate_is_coq_checked_and_its_mutants_rejected(coq_cache: Path) -> None:
    from proofs.coq_run import coq_check
    r = coq_check(_rounds4(), cache=coq_cache)
    assert r.status == {k: "checked" for k in ROUNDS4} and r.failed_steps == []
    c = copy.deepcopy(_rounds4())
    for edit in ROUNDS4_MUTANTS.values():
        edit(c)
    r = coq_check(c, cache=coq_cache)
    assert sorted(r.failed_steps) == list(range(len(ROUNDS4)))
    assert r.status == {k: "not checked" for k in ROUNDS4}


def test_check_certificate_coq_without_coqc(tmp_path: Path, monkeypatch, capsys) -> None:
    from proofs.cli import check_main
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)
    code = check_main([str(tmp_path / "missing.json"), "--coq", "--no-retrace"])
    err = capsys.readouterr().err
    assert code == 3
    assert err.count("\n") == 1 and "apt-get install -y coq" in err
