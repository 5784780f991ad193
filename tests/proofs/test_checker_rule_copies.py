"""The checker's copy of each rewrite rule accepts the producer's own instances of it, and the
copies of the issue-12 rules reject instances whose guard fails.

For every rule of ``rewriting.RULES`` with a sampler: draw instances (seeded), rebuild the
producer's ``lhs -> rhs`` step as the normaliser logs it (node table, JSON-encoded substitution)
and replay it through ``proofs.checker_rules.instantiate_and_match``. A copy that drifted from
the producer (another rhs, a stricter guard) fails here rather than on a user's certificate.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from proofs.checker_rules import RULES as CHECKER, RuleMismatch, instantiate_and_match, \
    varying_table
from proofs.kernel import OPS as KERNEL_OPS
from proofs.kernel import NodeTable, decode_attr
from rewriting import RULES
from rewriting import build as b
from rewriting.build import encode_attr
from spec_lang.term import Binding, Term, walk



class RandomDraw:
    """A seeded :class:`rewriting.rule.Draw`."""

    def __init__(self, seed: int):
        import random

        self.r = random.Random(seed)

    def int(self, lo: int, hi: int) -> int:
        return self.r.randint(lo, hi)

    def choice(self, xs):
        return self.r.choice(list(xs))

    def bool(self) -> bool:
        return self.r.random() < 0.5

NEW = ("einsum-pointwise", "einsum-nested", "einsum-unit-dim", "reduce-max-unit-dim",
       "einsum-factor-out", "pow-const-factor", "allreduce-unit-axis", "part-unit-axis",
       "broadcast-unit-axis", "einsum-unit-axis", "reduce-max-unit-axis", "allgather-unit-axis")


def _replay(name: str, lhs: Term, rhs: Term, subst: dict, bd: Binding) -> None:
    """Log ``lhs -> rhs`` as the normaliser does and check it with the checker's copy."""
    table = NodeTable()
    ids: dict[int, int] = {}

    def nid(t: Term) -> int:
        for c in t.args:
            nid(c)
        if id(t) not in ids:
            ids[id(t)] = table.add(t.op.name, [ids[id(c)] for c in t.args], t.attrs,
                                   tuple((d.name, tuple(str(s) for s in d.shards))
                                         for d in t.dims))
        return ids[id(t)]

    enc: dict = {}
    for k, v in sorted(subst.items()):
        if isinstance(v, Term):
            enc[k] = ("node", nid(v))
        elif isinstance(v, tuple) and v and all(isinstance(x, Term) for x in v):
            enc[k] = ("nodes", tuple(nid(x) for x in v))
        else:
            enc[k] = ("attr", decode_attr(encode_attr(v)))
    li, ri = nid(lhs), nid(rhs)
    instantiate_and_match(CHECKER[name], enc, table, dict(bd), li, ri, varying_table(table))


@pytest.mark.parametrize("rule", [r for r in RULES if r.sample is not None],
                         ids=lambda r: r.name)
def test_checker_copy_accepts_the_producers_instances(rule):
    for seed in range(6):
        lhs, bd = rule.sample(RandomDraw(seed))
        s = rule.match(lhs, bd)
        assert s is not None, f"{rule.name}: the sampler's instance does not match"
        rhs = rule.rhs(s, bd)
        assert rule.lhs(s) is lhs
        # every op a rule writes has a certificate row (ERF was missing until stop 25: every
        # exact-GELU plan ended in an internal error)
        missing = {t.op.name for t in walk([lhs, rhs])} - KERNEL_OPS
        assert not missing, f"the kernel's op table lacks {sorted(missing)}"
        _replay(rule.name, lhs, rhs, s, bd)


def test_every_issue12_rule_has_a_checker_copy():
    assert set(NEW) <= set(CHECKER)


# -- guards: the checker recomputes them -------------------------------------------------------

BD = Binding({"B": 4, "H": 4, "F": 4, "S": 4, "G": 1, "dp": 2, "tp": 2, "mb": 2})


def test_unit_axis_rules_need_an_axis_of_size_one():
    x = b.inp("x", ["B", "H"])
    lhs = b.all_reduce(b.part(x, "dp"), "dp")
    with pytest.raises(RuleMismatch, match=r"\|a\| == 1"):
        _replay("allreduce-unit-axis", lhs, b.part(x, "dp"),
                {"x": b.part(x, "dp"), "a": "dp", "r": "sum"}, BD)
    g = b.inp("g", ["B", "F"])
    lhs = b.einsum([b.shard(g, "B", "dp"), b.shard(x, "B", "dp")], ["F", "H"])
    with pytest.raises(RuleMismatch):
        _replay("einsum-unit-axis", lhs, b.einsum([g, x], ["F", "H"]),
                {"xs": (g, x), "mask": (True, True), "d": "B", "a": "dp", "out": ("F", "H")}, BD)
    _replay("einsum-unit-axis", lhs, b.einsum([g, x], ["F", "H"]),
            {"xs": (g, x), "mask": (True, True), "d": "B", "a": "dp", "out": ("F", "H")},
            BD.replace(dp=1))


def test_pow_const_factor_needs_a_positive_constant_and_a_fractional_power():
    y = b.inp("y", ["B"], domain="positive")
    for c, e in [(Fraction(-2), Fraction(1, 2)), (Fraction(2), Fraction(2))]:
        lhs = b.pow_(b.mul(b.const(c), y), e)
        rhs = b.mul(b.const(Fraction(4)), b.pow_(y, e))
        with pytest.raises(RuleMismatch):
            _replay("pow-const-factor", lhs, rhs, {"xs": lhs.args[0].args, "k": 0, "e": e}, BD)


def test_einsum_nested_refuses_a_captured_dim():
    """(sum_H x w) * v summed over H again is not one contraction over H."""
    x, w, v = b.inp("x", ["B", "H"]), b.inp("w", ["H"]), b.inp("v", ["H"])
    inner = b.einsum([x, w], ["B"])
    lhs = b.einsum([inner, v], ["B"])
    with pytest.raises(RuleMismatch, match="inner contracted"):
        _replay("einsum-nested", lhs, b.einsum([x, w, v], ["B"]),
                {"xs": lhs.args, "k": lhs.args.index(inner), "out": ("B",)}, BD)


def test_einsum_unit_dim_needs_a_dim_of_size_one():
    x, y = b.inp("x", ["G", "H"]), b.inp("y", ["G", "H"])
    lhs = b.einsum([x, y], ["H"])
    rhs = b.einsum([b.einsum([x], ["H"]), b.einsum([y], ["H"])], ["H"])
    _replay("einsum-unit-dim", lhs, rhs, {"xs": lhs.args, "out": ("H",)}, BD)
    with pytest.raises(RuleMismatch, match="U non-empty"):
        _replay("einsum-unit-dim", lhs, rhs, {"xs": lhs.args, "out": ("H",)}, BD.replace(G=2))


def test_einsum_factor_out_keeps_factors_that_are_summed():
    x, w = b.inp("x", ["B", "H"]), b.inp("w", ["H"])
    lhs = b.einsum([x, w], ["B"])     # w is summed over H: it cannot leave
    with pytest.raises(RuleMismatch):
        _replay("einsum-factor-out", lhs, b.mul(w, b.einsum([x], ["B"])),
                {"xs": lhs.args, "out": ("B",)}, BD)
