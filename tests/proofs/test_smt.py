"""The z3 scalar encoding agrees with the reference evaluator (spec_lang/evaluate.py)."""

import json
from fractions import Fraction

import numpy as np
import pytest
import z3

from proofs.kernel import NodeTable, from_terms
from proofs.smt import _Encoder, build_query, run_query
from spec_lang.evaluate import evaluate, sample_inputs
from spec_lang.term import Binding, DimSpec, Op, term

from terms import add, all_gather, all_reduce, const, einsum, inp, mul, shard, unary

B = Binding({"B": 4, "F": 4, "H": 2, "V": 4, "S": 2, "tp": 2, "dp": 2})


def _cases():
    x, w = inp("x", "B", "F", kind="data"), inp("w", "F", "H")
    v = inp("v", "B", "H")
    yield "row-parallel", all_reduce(einsum(("B", "H"), shard(x, "F", "tp"), shard(w, "F", "tp")),
                                     "tp")
    yield "gather", all_gather(shard(v, "B", "dp"), "dp", "B")
    yield "reduce-scatter", term(Op.REDUCE_SCATTER, (shard(v, "H", "tp"),), ("dp", "B"),
                                 (DimSpec("B", ("dp",)), DimSpec("H", ("tp",))))
    yield "scaled sum", mul(const(Fraction(1, 3)), add(v, unary(Op.NEG, v), v))
    yield "max", term(Op.MAXIMUM, (v, mul(const(2), v)), (), v.dims)
    tok = term(Op.INPUT, (), ("tok", "data", "index", "V"), (DimSpec("B"),))
    yield "vocab-parallel one-hot", term(Op.ONE_HOT, (tok,), ("V",),
                                         (DimSpec("B"), DimSpec("V", ("tp",))))
    yield "causal", term(Op.CAUSAL_MASK, (), ("S", "T"), (DimSpec("S"), DimSpec("T")))


@pytest.mark.parametrize("name,t", list(_cases()), ids=[c[0] for c in _cases()])
def test_encoding_matches_the_evaluator(name, t):
    b = B.replace(T=2)
    rng = np.random.default_rng(0)
    inputs = sample_inputs([t], b, rng)
    want = evaluate([t], b, inputs)[t]
    table = NodeTable()
    ids = from_terms(table, [t])
    enc = _Encoder(table, b, 10_000)
    got = enc.value(ids[id(t)])
    subs = []
    for key, c in enc.consts.items():
        head, idx = key[:-1].rsplit("[", 1)
        assert head.startswith("in:"), key      # inputs' own namespace: in:["<kind>","<name>"]
        _kind, name_ = json.loads(head[3:])
        val = inputs[name_][tuple(int(i) for i in idx.split(",") if i)]
        if z3.is_to_real(c):
            subs.append((c.arg(0), z3.IntVal(int(val), enc.ctx)))
        else:
            subs.append((c, z3.RealVal(str(Fraction(val)), enc.ctx)))
    assert sorted(got.axes) == sorted(want.axes)
    data = want.transpose_to(got.axes)
    for idx in np.ndindex(got.data.shape):
        e = z3.simplify(z3.substitute(got.data[idx], *subs)) if subs else z3.simplify(got.data[idx])
        assert abs(float(e.as_fraction()) - data[idx]) < 1e-9, (name, idx)


def test_query_is_deterministic_and_proves_row_parallel():
    x, w = inp("x", "B", "F", kind="data"), inp("w", "F", "H")
    spec = einsum(("B", "H"), x, w)
    plan = all_reduce(einsum(("B", "H"), shard(x, "F", "tp"), shard(w, "F", "tp")), "tp")
    t = NodeTable()
    ids = from_terms(t, [spec, plan])
    q1 = build_query(t, ids[id(spec)], ids[id(plan)], B)
    q2 = build_query(t, ids[id(spec)], ids[id(plan)], B)
    assert q1.smt2 == q2.smt2
    assert run_query(q1, 10) == "unsat"
    bad = mul(const(Fraction(1, 2)), plan)
    ids = from_terms(t, [bad], ids)
    assert run_query(build_query(t, ids[id(spec)], ids[id(bad)], B), 10) == "sat"
