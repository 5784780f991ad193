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
