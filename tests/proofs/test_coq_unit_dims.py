"""The Coq lemmas of the sixth round (issue 17): gelu-def (``RulesActivation.v``, ``ERF`` an
arbitrary function in ``Term.v``), einsum-unit-dim, squeeze-elementwise, reduce-max-unit-dim
(``RulesUnitDim.v``: sums and maxima over dims of size 1, a size fact ``sz n = 1`` per unit
dim) and einsum-components (``RulesComponents.v``). A hand-made certificate with an instance of
each (``coq_certs6.rounds6``) is an instance of the Python rules, exports without hypotheses
and is Coq-checked; edits that put a step outside its guard (a squeezed dim of size 2, a split
into groups sharing a summed dim) or make it false (another constant in GELU's definition) are
rejected by the Python checker and by Coq."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from proofs.coq_export import export_certificate
from tests.proofs.coq_certs6 import ROUNDS6_MUTANTS, rounds6
from tests.proofs.test_coq import _python_accepts, coq_cache, needs_coq  # noqa: F401 (fixture)

ROUNDS6 = [o["name"] for o in rounds6()["obligations"]]


def test_rounds6_certificate_is_an_instance_of_the_python_rules() -> None:
    assert _python_accepts(rounds6()) == [True] * 6
    ex = export_certificate(rounds6())
    assert ex.opaque == {} and ex.rule_steps == 6 and ex.obligations == ROUNDS6


def test_the_unit_dim_steps_carry_a_size_fact_per_unit_dim() -> None:
    src = export_certificate(rounds6()).source
    facts = next(line for line in src.splitlines() if line.startswith("(* size facts"))
    # the binding's size-1 dims the unit-dim steps touch, and no other dim
    assert facts.endswith("(sz n = v): G = 1, K = 1, J = 1 *)"), facts


def test_rounds6_edits_are_rejected_by_the_python_checker() -> None:
    assert sorted(ROUNDS6_MUTANTS) == sorted(ROUNDS6)
    for name, edit in ROUNDS6_MUTANTS.items():
        c = copy.deepcopy(rounds6())
        edit(c)
        accepted = _python_accepts(c)
        assert accepted[ROUNDS6.index(name)] is False, name


@needs_coq
@pytest.mark.slow
def test_rounds6_certificate_is_coq_checked(coq_cache: Path) -> None:  # noqa: F811
    from proofs.coq_run import coq_check
    r = coq_check(rounds6(), cache=coq_cache)
    assert r.status == {k: "checked" for k in ROUNDS6} and r.failed_steps == []
    assert r.rule_steps_checked == 6 and r.claims == {}
    # Print Assumptions certificate: the usual axioms of Coq's reals and primitive integers; ERF
    # is an argument of the context (Term.uf), not a Parameter or an Axiom
    assert set(r.axioms) <= {"ClassicalDedekindReals.sig_forall_dec",
                             "ClassicalDedekindReals.sig_not_dec",
                             "FunctionalExtensionality.functional_extensionality_dep",
                             "Classical_Prop.classic",
                             "int", "lsr", "lsl", "land", "lor", "eqb", "leb", "add"}


@needs_coq
@pytest.mark.slow
def test_rounds6_edits_are_rejected_by_coq(coq_cache: Path) -> None:  # noqa: F811
    from proofs.coq_run import coq_check
    c = copy.deepcopy(rounds6())
    for edit in ROUNDS6_MUTANTS.values():
        edit(c)
    r = coq_check(c, cache=coq_cache)
    assert sorted(r.failed_steps) == list(range(6))
    assert r.status == {k: "not checked" for k in ROUNDS6}


def test_a_constant_the_exporter_cannot_read_keeps_a_merge_back() -> None:
    """ERF's derivative brings 2/sqrt(pi) (off the exporter's grammar: an input of its own in
    Coq, ``const?<node>``): a mul-canon step folding it with 1/2 could only fail in Coq, so it
    is exported as a hypothesis, saying why (the GPT-2 certificate with the exact GELU)."""
    B = [["B", []]]
    pi = lambda c: {"alg": [[c, [["pi", "-1/2"]]]]}  # noqa: E731
    nodes = [["INPUT", [], ["x", "data", "real"], B],       # 0
             ["CONST", [], [{"q": "1/2"}], []],             # 1
             ["CONST", [], [pi("2/1")], []],                # 2: 2 / sqrt(pi)
             ["MUL", [1, 2, 0], [], B],                     # 3
             ["CONST", [], [pi("1/1")], []],                # 4: 1 / sqrt(pi)
             ["MUL", [4, 0], [], B]]                        # 5
    c = {"format": "shardproof-certificate", "format_version": 3, "verdict": "EQUIVALENT",
         "binding": {"B": 4}, "nodes": nodes,
         "steps": [{"kind": "rule", "rule": "mul-canon", "lhs": 3, "rhs": 5,
                    "subst": {"xs": {"nodes": [1, 2, 0]}, "ys": {"nodes": [4, 0]}}}],
         "obligations": [{"name": "m", "kind": "loss", "method": "rewrite", "expected": 3,
                          "actual": 5, "proof": 0}],
         "plan": {"path": "pi.py", "sha256": "0" * 64}}
    ex = export_certificate(c)
    assert ex.unread_constants and ex.opaque == {
        0: "rule mul-canon: a constant the exporter cannot read (Coq sees an input of its own)"}
