"""TOPK_MASK with an eligibility operand (``ops.topk_mask(x, d, k, eligible=...)``): evaluator
against a brute-force reference, tracing errors, autodiff, the kernel's typing, SMT (unsupported:
no scalar encoding), and the rewrite rules: the one-operand topk rules never fire on the
two-operand form, and every rule that matches a two-operand instance is sound on it."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proofs.kernel import KernelError, NodeTable, from_terms, typecheck
from proofs.smt import SmtError, build_query
from rewriting import build as b
from rewriting import rules_for
from rewriting.instances import fresh
from spec_lang import ops
from spec_lang.autodiff import grad
from spec_lang.dims import Dim
from spec_lang.errors import SpecError
from spec_lang.evaluate import evaluate, sample_inputs
from spec_lang.spec import input_term
from spec_lang.tensor import Tensor, TraceContext, tracing
from spec_lang.term import Binding, Op, term

from rw_helpers import aligned

B, E = Dim("B", 5), Dim("E", 6)


def _brute(x: np.ndarray, el: np.ndarray, k: int) -> np.ndarray:
    """Row by row: the k largest eligible entries, ties to the lower index."""
    out = np.zeros_like(x)
    for r in range(x.shape[0]):
        idx = [j for j in range(x.shape[1]) if el[r, j] == 1]
        idx.sort(key=lambda j: (-x[r, j], j))
        out[r, idx[:k]] = 1
    return out


def _inp(name, *dims, domain="real"):
    return Tensor(input_term(name, "param", domain, dims))


@pytest.mark.parametrize("k", [1, 2, 4, 6])
def test_evaluator_matches_brute_force_with_ties_and_few_eligible(k) -> None:
    with tracing(TraceContext("spec")) as tr:
        tr.record_dim(B), tr.record_dim(E)
        x, el = _inp("x", B, E), _inp("el", E, B, domain="mask")   # other storage order
        m = ops.topk_mask(x, E, k, eligible=el)
    assert m.term.op is Op.STOP_GRAD and len(m.term.args[0].args) == 2
    rng = np.random.default_rng(k)
    for trial in range(5):
        xv = rng.integers(-2, 3, (5, 6)).astype(float) if trial % 2 else rng.standard_normal((5, 6))
        ev = (rng.uniform(size=(5, 6)) < 0.5).astype(float)
        ev[0] = 0                      # no eligible entry: all 0
        ev[1] = [1, 0, 0, 0, 0, 0]     # fewer than k eligible: those
        got = evaluate([m.term], Binding({"B": 5, "E": 6}), {"x": xv, "el": ev.T})[m.term]
        np.testing.assert_array_equal(got.transpose_to(("B", "E")), _brute(xv, ev, k))


def test_all_eligible_equals_the_one_operand_form() -> None:
    with tracing(TraceContext("spec")) as tr:
        tr.record_dim(B), tr.record_dim(E)
        x = _inp("x", B, E)
        one = ops.topk_mask(x, E, 3)
        two = ops.topk_mask(x, E, 3, eligible=one * 0 + 1)
    xv = np.round(np.random.default_rng(0).standard_normal((5, 6)))   # many ties
    v = evaluate([one.term, two.term], Binding({"B": 5, "E": 6}), {"x": xv})
    np.testing.assert_array_equal(v[one.term].transpose_to(("B", "E")),
                                  v[two.term].transpose_to(("B", "E")))


def test_eligible_must_have_the_dims_of_x_and_no_gradient_flows() -> None:
    with tracing(TraceContext("spec")) as tr:
        tr.record_dim(B), tr.record_dim(E)
        x = _inp("x", B, E)
        with pytest.raises(SpecError, match="eligible .* must have exactly the dims"):
            ops.topk_mask(x, E, 2, eligible=_inp("e1", E, domain="mask"))
        y = ops.sum(x * ops.topk_mask(x, E, 2, eligible=ops.topk_mask(x, E, 4)))
        g = grad(y.term, [x.term])[0]
        bare = Tensor(term(Op.TOPK_MASK, (x.term, x.term), ("E", 2), x.term.dims))
        with pytest.raises(SpecError, match="TOPK_MASK is on a differentiated path"):
            grad(ops.sum(bare * x).term, [x.term])
    rng = np.random.default_rng(1)
    xv = rng.standard_normal((5, 6))
    got = evaluate([g], Binding({"B": 5, "E": 6}), {"x": xv})[g].transpose_to(("B", "E"))
    top4 = _brute(xv, np.ones((5, 6)), 4)
    np.testing.assert_array_equal(got, _brute(xv, top4, 2))   # d/dx sum(x m) = m (m constant)


def test_kernel_types_the_two_operand_form_and_smt_has_no_encoding() -> None:
    x, el = fresh(["B", "H"]), b.topk_mask(fresh(["B", "H"]), "H", 2)
    t2 = b.topk_mask(x, "H", 1, el)
    table = NodeTable()
    ids = from_terms(table, [t2])
    for i in range(len(table.nodes)):
        typecheck(table, i)
    assert table.nodes[ids[id(t2)]][0] == "TOPK_MASK" and len(table.nodes[ids[id(t2)]][1]) == 2
    with pytest.raises(SmtError, match="no scalar encoding for op TOPK_MASK"):
        build_query(table, ids[id(t2)], ids[id(t2)], Binding({"B": 2, "H": 3}))
    for bad in (term(Op.TOPK_MASK, (x, fresh(["H"])), ("H", 1), x.dims),           # dims differ
                term(Op.TOPK_MASK, (x, el, el), ("H", 1), x.dims)):                # 3 operands
        tb = NodeTable()
        bid = from_terms(tb, [bad])[id(bad)]
        with pytest.raises(KernelError, match="TOPK_MASK"):
            typecheck(tb, bid)


# -- the rewrite rules on the two-operand form -----------------------------------------------------

def _wrap(kind: str, x, d: str, draw):
    if kind == "shard":
        return b.shard(x, d, "dp")
    if kind == "perm":
        return b.permute(x, d, (1, 0))
    return x


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_topk_rules_never_fire_wrongly_on_the_two_operand_form(data) -> None:
    """Instances ``TOPK_MASK(wx(x), we(el), H, k)`` with each operand plain, sharded or
    permuted along ``B``/``S``: the one-operand rules (``lift-shard-topk``, ``lift-perm-topk``)
    never match; any rule that does match rebuilds the node and is sound in float64."""
    d = data.draw(st.sampled_from(["B", "S"]))
    kx, ke = (data.draw(st.sampled_from(["plain", "shard", "perm"])) for _ in range(2))
    k = data.draw(st.integers(1, 3))
    x, el0 = fresh(["B", "S", "H"]), b.topk_mask(fresh(["B", "S", "H"]), "H", 3)
    t = b.topk_mask(_wrap(kx, x, d, data), "H", k, _wrap(ke, el0, d, data))
    bd = Binding({"B": 4, "S": 4, "H": 5, "dp": 2})
    fired = []
    for rule in rules_for(Op.TOPK_MASK):
        s = rule.match(t, bd)
        if rule.name in ("lift-shard-topk", "lift-perm-topk"):
            assert s is None, f"{rule.name} matched the two-operand form {t!r}"
        if s is None:
            continue
        fired.append(rule.name)
        assert rule.lhs(s) is t and rule.guard(s, bd)
        rhs = rule.rhs(s, bd)
        rng = np.random.default_rng(data.draw(st.integers(0, 2**31)))
        inputs = sample_inputs([t, rhs], bd, rng)
        vals = evaluate([t, rhs], bd, inputs, rng=rng)
        lv, rv = aligned(vals[t], vals[rhs])
        np.testing.assert_array_equal(lv, rv, err_msg=rule.name)
    if kx == ke == "shard":
        assert "lift-shard-topk-elig" in fired
    if kx == ke == "perm":
        assert "lift-perm-topk-elig" in fired
    if kx != ke and "plain" not in (kx, ke):
        assert not set(fired) & {"lift-shard-topk-elig", "lift-perm-topk-elig"}


def test_elig_rules_require_both_operands_blocks_of_the_same_split() -> None:
    x, el = fresh(["B", "S", "H"]), b.topk_mask(fresh(["B", "S", "H"]), "H", 2)
    bd = Binding({"B": 4, "S": 4, "H": 5, "dp": 2, "cp": 2})
    rule = {r.name: r for r in rules_for(Op.TOPK_MASK)}["lift-shard-topk-elig"]
    for xs, es in itertools.product([("B", "dp"), ("S", "dp"), ("B", "cp")], repeat=2):
        t = b.topk_mask(b.shard(x, *xs), "H", 1, b.shard(el, *es))
        assert (rule.match(t, bd) is not None) == (xs == es), (xs, es)
    # a shard along the selected dim itself is not a block of the selection
    t = b.topk_mask(b.shard(x, "H", "dp"), "H", 1, b.shard(el, "H", "dp"))
    assert rule.match(t, Binding({"B": 4, "S": 4, "H": 4, "dp": 2})) is None
