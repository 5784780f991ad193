"""Renaming classes (proofs/obligations.py): every goal that reuses one points at its class's
representative, a goal that reuses nothing (issue 14: reuse chains left DeepSeek-V3's cut
premises unproved until their whole-term retry)."""

from dataclasses import dataclass

from proofs.obligations import group_identical
from spec_lang.term import Op, Term

from terms import add, inp, mul, unary


@dataclass
class _Goal:
    name: str
    expected: Term
    actual: Term
    kind: str = "lemma"


def _goal(name: str, x: str) -> _Goal:
    """``exp(x) == exp(x) * x + x``: the same structure whatever the input is called."""
    v = inp(x, "H")
    return _Goal(name, unary(Op.EXP, v), add(mul(unary(Op.EXP, v), v), v))


def test_a_fast_path_match_points_at_the_class_representative():
    # one canonical class; two layer-key classes (the parameter name after the layer index)
    goals = [_goal("a0", "layers.0.a"), _goal("b0", "layers.0.b"), _goal("b1", "layers.1.b"),
             _goal("a1", "layers.1.a"), _goal("c", "head.c")]
    reuse = group_identical(goals)
    assert reuse == {"b0": "a0", "b1": "a0", "a1": "a0", "c": "a0"}
    assert not set(reuse.values()) & set(reuse)


def test_different_structures_stay_apart():
    v = inp("layers.1.a", "H")
    other = _Goal("x1", unary(Op.EXP, v), add(mul(unary(Op.EXP, v), v), unary(Op.EXP, v)))
    goals = [_goal("a0", "layers.0.a"), other, _goal("a2", "layers.2.a")]
    assert group_identical(goals) == {"a2": "a0"}
