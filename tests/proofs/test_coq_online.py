"""The Coq lemmas of the online-softmax rules (``proofs/coq/RulesOnline.v``, issue 17):
einsum-max-factor-out, einsum-recip-factor-out and exp-max-shift-block. A hand-made
certificate with one instance of each (``coq_certs5.rounds5``) is an instance of the Python
rules, exports without hypotheses and is Coq-checked; edits that put a step outside its guard
(the equation still true) or make it false are rejected by the Python checker and by Coq."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from proofs.coq_export import export_certificate
from tests.proofs.coq_certs5 import ROUNDS5_FALSE, ROUNDS5_MUTANTS, rounds5
from tests.proofs.test_coq import _python_accepts, coq_cache, needs_coq  # noqa: F401 (fixture)

ROUNDS5 = [o["name"] for o in rounds5()["obligations"]]


def test_rounds5_certificate_is_an_instance_of_the_python_rules() -> None:
    assert _python_accepts(rounds5()) == [True, True, True]
    ex = export_certificate(rounds5())
    assert ex.opaque == {} and ex.rule_steps == 3 and ex.obligations == ROUNDS5


@pytest.mark.parametrize("edits", [ROUNDS5_MUTANTS, ROUNDS5_FALSE], ids=["guard", "false"])
def test_rounds5_edits_are_rejected_by_the_python_checker(edits) -> None:
    assert sorted(edits) == sorted(ROUNDS5)
    for name, edit in edits.items():
        c = copy.deepcopy(rounds5())
        edit(c)
        accepted = _python_accepts(c)
        assert accepted[ROUNDS5.index(name)] is False, name
        assert accepted.count(True) == 2, name


@needs_coq
@pytest.mark.slow
def test_rounds5_certificate_is_coq_checked(coq_cache: Path) -> None:  # noqa: F811
    from proofs.coq_run import coq_check
    r = coq_check(rounds5(), cache=coq_cache)
    assert r.status == {k: "checked" for k in ROUNDS5} and r.failed_steps == []
    assert r.rule_steps_checked == 3


@needs_coq
@pytest.mark.slow
@pytest.mark.parametrize("edits", [ROUNDS5_MUTANTS, ROUNDS5_FALSE], ids=["guard", "false"])
def test_rounds5_edits_are_rejected_by_coq(coq_cache: Path, edits) -> None:  # noqa: F811
    from proofs.coq_run import coq_check
    c = copy.deepcopy(rounds5())
    for edit in edits.values():
        edit(c)
    r = coq_check(c, cache=coq_cache)
    assert sorted(r.failed_steps) == [0, 1, 2]
    assert r.status == {k: "not checked" for k in ROUNDS5}
