"""Cancelling rules keep definedness (issue 10, family 3): the zero cases, where they must not fire.

``x^-1 * x = 1`` (and every merge or drop of a power) holds only where ``x != 0``.
``rewriting/signs.py`` derives nonzero-ness from the input domains; these tests build bases
that a domain-valid input makes 0 (a per-sequence, per-rank token count, a real input, a sum of
squares without epsilon) and check that the rewrite keeps the base, numerically at an input
where the base *is* 0, and that the checker's own copy of each rule (``proofs/checker_rules.py``,
``proofs/checker_signs.py``) rejects the unguarded cancellation.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from proofs.checker_rules import RULES as CHECKER_RULES
from proofs.checker_rules import RuleMismatch, instantiate_and_match, varying_table
from proofs.checker_signs import Signs as CheckerSigns
from proofs.kernel import NodeTable, from_terms
from rewriting import RULES
from rewriting import build as b
from rewriting.instances import draw_binding, fresh, maybe_zero_base, nonzero_base
from rewriting.signs import CONTEXT_FREE, NONNEG, POS, Signs
from spec_lang.evaluate import evaluate, sample_inputs
from spec_lang.term import Binding, DimSpec, Op, term, walk

from rw_helpers import HypothesisDraw, RandomDraw, aligned

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NaN on purpose

RULE = {r.name: r for r in RULES}


def _instance(kind: str, n, y):
    """An instance of a cancelling rule whose unguarded rewrite drops (or merges) base ``n``."""
    if kind == "mul-canon":          # n^-1 * n * y -> y
        return b.mul(b.pow_(n, -1), n, y)
    if kind == "einsum-mul-canon":   # sum_F(n^-1 * n * w) -> sum_F(w)
        return b.einsum([n, b.pow_(n, -1), y], [d.name for d in n.dims])
    if kind == "add-canon":          # y + n^-1 - n^-1 -> y
        return b.add(y, b.pow_(n, -1), b.mul(b.const(-1), b.pow_(n, -1)))
    if kind == "pow-pow":            # (n^-1)^-1 -> n
        return b.pow_(b.pow_(n, -1), -1)
    raise AssertionError(kind)


def _zero_inputs(t, binding: Binding, base, seed: int = 0) -> dict[str, np.ndarray]:
    """A domain-valid draw on which ``base`` is 0 at some element: its masks are 0 but for their
    last element (the mask domain keeps a 1), its real inputs 0, and for ``p - q`` q := p."""
    inputs = sample_inputs([t], binding, np.random.default_rng(seed))
    for x in walk([base]):
        if x.op is Op.INPUT and x.attrs[2] in ("mask", "real"):
            v = inputs[x.attrs[0]]
            v[...] = 0.0
            if x.attrs[2] == "mask":
                v.reshape(-1)[-1] = 1.0
    if base.op is Op.ADD:
        p = next(a for a in base.args if a.op is Op.INPUT)
        q = next(a.args[1] for a in base.args if a.op is Op.MUL)
        inputs[q.attrs[0]] = inputs[p.attrs[0]].copy()
    return inputs


CANCELLING = ["mul-canon", "einsum-mul-canon", "add-canon", "pow-pow"]


@pytest.mark.parametrize("kind", CANCELLING)
@pytest.mark.parametrize("seed", range(8))
def test_a_base_that_may_be_zero_is_never_cancelled(kind, seed):
    draw = RandomDraw(seed)
    dims = ["B"] if kind != "einsum-mul-canon" else ["B", "S"]
    n = maybe_zero_base(draw, dims)
    y = fresh(dims + (["H"] if kind == "einsum-mul-canon" else []))
    t, binding = _instance(kind, n, y), draw_binding(draw)
    assert CONTEXT_FREE.sign(n) & 2, f"{n!r} should be possibly 0"
    rule = RULE[kind]
    s = rule.match(t, binding)
    if s is None:
        return            # the rule does not fire: nothing to check
    rhs = rule.rhs(s, binding)
    assert rule.guard(s, binding)
    # fired (to reorder): the result is undefined exactly where the instance is
    inputs = _zero_inputs(t, binding, n, seed)
    vals = evaluate([t, rhs], binding, inputs, rng=np.random.default_rng(seed))
    x, z = aligned(vals[t], vals[rhs])
    assert not np.isfinite(x).all(), "the zero draw must make the instance undefined"
    np.testing.assert_array_equal(np.isfinite(z), np.isfinite(x))


@pytest.mark.parametrize("kind", CANCELLING)
def test_the_unguarded_rewrite_was_wrong_and_the_checker_rejects_it(kind):
    """At a domain-valid input where the base is 0 the left side is NaN and the unguarded
    right side finite (a fully padded sequence's token count); the checker's copy of the rule
    refuses that step."""
    n = b.einsum([b.inp("mask_seq", ["B", "S"], "data", "mask")], ["B"])  # tokens per sequence
    y = fresh(["B"]) if kind != "einsum-mul-canon" else fresh(["B", "H"])
    t = _instance(kind, n, y)
    bad_rhs = {"mul-canon": y, "add-canon": y, "pow-pow": n,
               "einsum-mul-canon": b.einsum([y], ["B"])}[kind]
    binding = Binding({"B": 4, "S": 3, "H": 2, "dp": 2, "tp": 2, "cp": 2, "mb": 2, "F": 4,
                       "V": 4})
    inputs = _zero_inputs(t, binding, n)
    vals = evaluate([t, bad_rhs], binding, inputs, rng=np.random.default_rng(0))
    x, z = aligned(vals[t], vals[bad_rhs])
    assert np.isfinite(z).all()
    # (n^-1)^-1 at n = 0 is undefined over the reals, but float64 makes it 1/inf = 0
    assert kind == "pow-pow" or not np.isfinite(x).all()
    # the checker: the forged step lhs -> bad_rhs under the rule's own substitution shape
    subst_terms = {"mul-canon": {"xs": t.args, "ys": (y,)},
                   "add-canon": {"xs": t.args, "ys": (y,)},
                   "pow-pow": {"x": n, "a": Fraction(-1), "b": Fraction(-1)},
                   "einsum-mul-canon": {"xs": t.args, "ys": (y,), "out": ("B",)}}[kind]
    table, ids = NodeTable(), {}
    from_terms(table, [t, bad_rhs], ids)
    subst = {}
    for k, v in subst_terms.items():
        if isinstance(v, tuple) and v and all(hasattr(e, "op") for e in v):
            subst[k] = ("nodes", tuple(ids[id(e)] for e in v))
        elif hasattr(v, "op"):
            subst[k] = ("node", ids[id(v)])
        else:
            subst[k] = ("attr", v)
    with pytest.raises(RuleMismatch, match="defined"):
        instantiate_and_match(CHECKER_RULES[kind], subst, table, dict(binding), ids[id(t)],
                              ids[id(bad_rhs)], varying_table(table), CheckerSigns(table))


@pytest.mark.parametrize("kind", ["mul-canon", "pow-pow"])
@pytest.mark.parametrize("seed", range(6))
def test_a_nonzero_base_is_cancelled(kind, seed):
    draw = RandomDraw(seed)
    n = nonzero_base(draw, ["B"], product=False)
    y = fresh(["B"])
    t = _instance(kind, n, y)
    s = RULE[kind].match(t, draw_binding(draw))
    assert s is not None
    rhs = RULE[kind].rhs(s, draw_binding(draw))
    if kind == "mul-canon":
        assert rhs is y
    else:                 # (n^-1)^-1 = n^1 (pow-one makes it n)
        assert rhs.op is Op.POW and rhs.args[0] is n and rhs.attrs[0] == 1


def test_mask_totals_and_covering_indicators():
    """The derivations the spec's own denominators rest on."""
    m = b.inp("m", ["B", "S"], "data", "mask")
    x = fresh(["B", "S"])
    whole = b.einsum([m], [])
    assert Signs().sign(whole) == POS                                   # the batch has a token
    assert Signs(mask_total=False).sign(whole) == NONNEG
    assert CONTEXT_FREE.sign(b.einsum([m], ["B"])) == NONNEG            # a sequence may not
    assert CONTEXT_FREE.sign(b.einsum([b.shard(m, "B", "dp")], [])) == NONNEG   # a rank may not
    assert CONTEXT_FREE.sign(b.einsum([b.chunk(m, "B", 2, 1)], [])) == NONNEG   # nor a chunk
    cm = term(Op.CAUSAL_MASK, (), ("S", "T"), (DimSpec("S"), DimSpec("T")))
    e = b.unary(Op.EXP, fresh(["B", "S", "T"]))
    assert CONTEXT_FREE.sign(b.einsum([e, cm], ["B", "S"])) == POS       # the diagonal
    assert CONTEXT_FREE.sign(b.einsum([x, x], [])) == NONNEG            # sum of squares
    assert CONTEXT_FREE.sign(b.add(b.einsum([b.mul(x, x)], []), b.const(Fraction(1, 10)))) == POS


@given(data=st.data())
def test_checker_signs_agree_with_the_producer(data):
    """The checker's own derivation gives the same sign sets and definedness as
    ``rewriting/signs.py`` on every node of every rule's sampled instance."""
    rule = data.draw(st.sampled_from(RULES))
    lhs, binding = rule.sample(HypothesisDraw(data))
    extra = [maybe_zero_base(HypothesisDraw(data), ["B"]),
             nonzero_base(HypothesisDraw(data), ["B"])]
    nodes = walk([lhs, *extra])
    table, ids = NodeTable(), {}
    from_terms(table, nodes, ids)
    theirs = CheckerSigns(table)
    for t in nodes:
        i = ids[id(t)]
        assert (CONTEXT_FREE.sign(t), CONTEXT_FREE.defined(t)) == \
            (theirs.sign(i), theirs.defined(i)), f"{t!r}"


def test_a_sum_of_a_partial_sum_of_a_covering_indicator():
    """B42's local token count ``sum_E sum_T topk_mask(scores, E, k)`` (the inner sum over this
    rank's block of T) is > 0 for the producer and the checker; a sum that leaves the covering
    dim E free, or a top-0 mask, is only >= 0."""
    scores = fresh(["E", "T"])
    m = b.shard(b.topk_mask(scores, "E", 1), "T", "ep")
    per_expert = b.einsum([m], ["E"])                    # sum over this rank's tokens
    cases = {b.einsum([per_expert], []): POS,            # then over experts: n_local * k
             per_expert: NONNEG,                         # an expert may get no token
             b.einsum([b.einsum([b.shard(b.topk_mask(scores, "E", 0), "T", "ep")], ["E"])], []):
             NONNEG}
    nodes = walk(list(cases))
    table, ids = NodeTable(), {}
    from_terms(table, nodes, ids)
    theirs = CheckerSigns(table)
    for t, want in cases.items():
        assert CONTEXT_FREE.sign(t) == want, f"{t!r}"
        assert theirs.sign(ids[id(t)]) == want, f"{t!r}"


def test_a_covering_indicator_sliced_along_another_summed_dim():
    """The flattened form ``sum_{E,T} SHARD(topk_mask(E), T, ep)`` (B42 after einsum-nested) is
    > 0: a rank's block of T is nonempty and each of its rows has a 1 along the whole E. Sliced
    along the covering dim E itself, it is only >= 0 (the block may miss the selected expert)."""
    scores = fresh(["E", "T"])
    cases = {b.einsum([b.shard(b.topk_mask(scores, "E", 1), "T", "ep")], []): POS,
             b.einsum([b.shard(b.topk_mask(scores, "E", 1), "E", "ep")], []): NONNEG}
    nodes = walk(list(cases))
    table, ids = NodeTable(), {}
    from_terms(table, nodes, ids)
    theirs = CheckerSigns(table)
    for t, want in cases.items():
        assert CONTEXT_FREE.sign(t) == want, f"{t!r}"
        assert theirs.sign(ids[id(t)]) == want, f"{t!r}"


def test_a_nested_sum_of_the_whole_mask_is_its_total():
    """``sum_S sum_B mask`` is the batch's token count (> 0 by the mask domain), producer and
    checker; a sum of one rank's block, or one that keeps S, is only >= 0."""
    m = b.inp("m", ["B", "S"], "data", "mask")
    cases = {b.einsum([b.einsum([m], ["S"])], []): POS,
             b.einsum([b.einsum([b.shard(m, "B", "dp")], ["S"])], []): NONNEG,
             b.einsum([b.einsum([m], ["S"])], ["S"]): NONNEG}
    nodes = walk(list(cases))
    table, ids = NodeTable(), {}
    from_terms(table, nodes, ids)
    theirs = CheckerSigns(table)
    for t, want in cases.items():
        assert Signs().sign(t) == want, f"{t!r}"
        assert theirs.sign(ids[id(t)]) == want, f"{t!r}"


def test_add_canon_may_not_introduce_an_undefined_monomial():
    """Found formalising issue 17 in Coq: the guard checked only monomials the step drops, so
    ``y -> y + n^-1 - n^-1`` (n a token count, 0 on a fully padded sequence) was accepted in
    that direction, and a ``sym`` step would relate a plan that is undefined there to a spec
    that is not. Both copies now check both directions; the producer's guard refuses too."""
    n = b.einsum([b.inp("mask_seq", ["B", "S"], "data", "mask")], ["B"])
    y = fresh(["B"])
    inv = b.pow_(n, Fraction(-1))
    grown = b.add(y, inv, b.mul(b.const(-1), inv))
    binding = Binding({"B": 4, "S": 3})
    table, ids = NodeTable(), {}
    from_terms(table, [y, grown], ids)
    subst = {"xs": ("nodes", (ids[id(y)],)),
             "ys": ("nodes", tuple(ids[id(e)] for e in grown.args))}
    with pytest.raises(RuleMismatch, match="defined"):
        instantiate_and_match(CHECKER_RULES["add-canon"], subst, table, dict(binding),
                              ids[id(y)], ids[id(grown)], varying_table(table),
                              CheckerSigns(table))
    assert not RULE["add-canon"].guard({"xs": (y,), "ys": grown.args}, binding)


def test_a_zeroth_power_is_one_even_of_zero():
    """Found formalising issue 17 in Coq (``Signs.spow``: ``rpow 0 0 = 1``): both copies of the
    sign analysis gave ``x^0`` the sign of ``x`` restricted to ``{0, +}``, so ``0^0`` was "0"
    (numpy and the reals: 1), ``s = 1 + 0^0 w`` was "positive" and ``s^-1 s w = w`` passed the
    guard, false at ``w = -1`` (the left side is NaN there). Now ``x^0`` is positive."""
    w = fresh(["B"])
    zz = b.pow_(b.const(0), Fraction(0))
    s = b.add(b.const(1), b.mul(zz, w))
    lhs = b.mul(b.pow_(s, Fraction(-1)), s, w)
    binding = Binding({"B": 4})
    assert CONTEXT_FREE.sign(zz) == POS and CONTEXT_FREE.sign(s) != POS
    table, ids = NodeTable(), {}
    from_terms(table, [lhs], ids)
    assert CheckerSigns(table).sign(ids[id(zz)]) == POS
    subst = {"xs": ("nodes", tuple(ids[id(a)] for a in lhs.args)), "ys": ("nodes", (ids[id(w)],))}
    with pytest.raises(RuleMismatch, match="defined"):
        instantiate_and_match(CHECKER_RULES["mul-canon"], subst, table, dict(binding),
                              ids[id(lhs)], ids[id(w)], varying_table(table), CheckerSigns(table))
    with np.errstate(all="ignore"):
        v = np.float64(-1.0)
        assert np.isnan((1 / (1 + 0.0 ** 0 * v)) * (1 + 0.0 ** 0 * v) * v)
