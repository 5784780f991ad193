"""The egglog oracle agrees with the normaliser, proves what only exploration reaches, and never
proves a false goal."""

from __future__ import annotations

import pytest

from rewriting import RULES, decide
from rewriting import build as b
from spec_lang.term import Binding

from rw_helpers import RandomDraw
from test_negative import BD, CASES

pytest.importorskip("egglog")


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.name)
def test_agrees_with_the_normaliser_on_rule_instances(rule):
    lhs, bd = rule.sample(RandomDraw(7))
    rhs = rule.rhs(rule.match(lhs, bd), bd)
    d = decide(lhs, rhs, bd, timeout_s=20)
    assert d.equal is True and d.reason == "normal forms are equal"


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_never_proves_a_false_goal(case):
    _name, _rule, lhs, wrong = case
    d = decide(lhs, wrong, BD, timeout_s=20)
    assert d.equal is not True, d.edges


BIND = Binding({"B": 4, "H": 4, "F": 8, "S": 4, "tp": 2, "dp": 2})
x, y, w, v = (b.inp("gx", ["B", "H"]), b.inp("gy", ["B", "H"]), b.inp("gw", ["H", "F"]),
              b.inp("gv", ["F", "S"]))


def test_proves_what_only_exploration_reaches():
    # linearity of a contraction in an operand: the normaliser does not distribute
    lhs = b.einsum([b.add(x, y), w], ["B", "F"])
    rhs = b.add(b.einsum([x, w], ["B", "F"]), b.einsum([y, w], ["B", "F"]))
    d = decide(lhs, rhs, BIND, timeout_s=30)
    assert d.equal is True and d.reason.startswith("e-graph")
    assert "einsum-add-dist" in {e[1] for e in d.edges}
    assert d.representative is not None
    # nested contractions: (x w) v = x (w v)
    lhs = b.einsum([b.einsum([x, w], ["B", "F"]), v], ["B", "S"])
    rhs = b.einsum([x, b.einsum([w, v], ["H", "S"])], ["B", "S"])
    assert decide(lhs, rhs, BIND, timeout_s=30).equal is True


def test_a_true_goal_under_tensor_parallelism():
    # row-parallel after a distributed sum: sum_tp (x + y)_F-block w_F-block = (x + y) w
    xs, ys = b.inp("hx", ["B", "F"]), b.inp("hy", ["B", "F"])
    w2 = b.inp("hw", ["F", "H"])
    lhs = b.all_reduce(b.einsum([b.add(b.shard(xs, "F", "tp"), b.shard(ys, "F", "tp")),
                                 b.shard(w2, "F", "tp")], ["B", "H"]), "tp")
    rhs = b.add(b.einsum([xs, w2], ["B", "H"]), b.einsum([ys, w2], ["B", "H"]))
    assert decide(lhs, rhs, BIND, timeout_s=30).equal is True


def test_false_goal_needing_exploration_is_not_proved():
    lhs = b.einsum([b.add(x, y), w], ["B", "F"])
    rhs = b.add(b.einsum([x, w], ["B", "F"]), b.einsum([x, w], ["B", "F"]))
    assert decide(lhs, rhs, BIND, timeout_s=30).equal is None


def test_root_level_chain_is_returned_and_replays():
    from rewriting import Normaliser
    from rewriting.explore import EXPLORE
    from rewriting.rule import RULES as ALL

    lhs = b.einsum([b.add(x, y), w], ["B", "F"])
    rhs = b.add(b.einsum([x, w], ["B", "F"]), b.einsum([y, w], ["B", "F"]))
    n = Normaliser(BIND)
    d = decide(lhs, rhs, BIND, timeout_s=30, normaliser=n)
    assert d.chain, "expected a root-level chain"
    by_name = {r.name: r for r in ALL + EXPLORE}
    cur = n.nf(lhs)
    for t, name, s, u, forward in d.chain:
        r = by_name[name]
        assert r.lhs(s) is t and r.guard(s, BIND) and n.nf(r.rhs(s, BIND)) is u
        assert cur is (t if forward else u)
        cur = u if forward else t
    assert cur is n.nf(rhs)
