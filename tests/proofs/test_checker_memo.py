"""The checker's shortcuts (issue 14, DeepSeek-V3's check <= 5 s) decide exactly as the plain
code they replace:

* ``varying_table`` shares one child's set where the plain walk built a new one per node;
* ``checker_cut.signatures`` compares two nodes by one integer where ``_instance`` compared op,
  dims, arity and typed attrs (an input's without its name);
* the node-table step typechecks one node per (op, typed attrs, dims, args' dims) key: a
  node's shape rule reads nothing else;
* ``check_sizes`` computes the local sizes once per dims tuple.

Each is compared with the plain version on random tables (hypothesis, derandomised in CI), and
forged rows that differ from a well-typed row only where the key looks are still rejected.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proofs.certificate import write_certificate
from proofs.checker import check_certificate
from proofs.checker_cut import _is_cut_name, signatures
from proofs.checker_rules import varying_table
from proofs.errors import CertificateError
from proofs.kernel import NodeTable
from terms import two_row_parallel_certificate

AXES = ("dp", "tp", "pp")
OPS = ("INPUT", "ADD", "MUL", "SHARD", "PART", "RANK_CONST", "REDUCE_SCATTER", "ALL_TO_ALL",
       "ALL_REDUCE", "ALL_GATHER", "BROADCAST", "ONE_HOT", "EXP")


def _plain_varying(table):
    """``varying_table`` as it was before the shortcut (a new set per node)."""
    out = []
    for op, args, attrs, dims in table.nodes:
        v = set()
        for c in args:
            v |= out[c]
        if op == "SHARD":
            v.add(attrs[1])
        elif op in ("PART", "RANK_CONST", "REDUCE_SCATTER", "ALL_TO_ALL"):
            v.add(attrs[0])
        elif op in ("ALL_REDUCE", "ALL_GATHER", "BROADCAST"):
            v.discard(attrs[0])
        elif op == "ONE_HOT":
            v |= {a for n, s in dims if n == attrs[0] for a in s if not a.startswith("#")}
        out.append(frozenset(v))
    return out


@st.composite
def _tables(draw):
    """Rows ``(op, args, attrs, dims)`` over earlier rows; attrs carry an axis where the op
    reads one, and values of several types (``1``, ``True``, ``"1"``) elsewhere."""
    rows = []
    for i in range(draw(st.integers(1, 40))):
        op = draw(st.sampled_from(OPS)) if i else "INPUT"
        args = () if op == "INPUT" else tuple(
            draw(st.lists(st.integers(0, i - 1), min_size=1, max_size=3)))
        ax = draw(st.sampled_from(AXES))
        lit = draw(st.sampled_from((1, True, "1", 2)))
        dims = tuple(draw(st.lists(st.sampled_from(
            (("B", ()), ("B", ("dp",)), ("H", ("tp", "#0/2")), ("E", ("pp",)))),
            max_size=2, unique_by=lambda d: d[0])))
        if op == "INPUT":
            name = draw(st.sampled_from(("x", "y", "cut:0", "cut:1")))
            attrs = (name, draw(st.sampled_from(("param", "data"))),
                     draw(st.sampled_from(("real", "positive"))))
        elif op == "SHARD":
            attrs = ("B", ax)
        elif op == "ONE_HOT":
            attrs = (draw(st.sampled_from(("B", "H", "E"))), lit)
        else:
            attrs = (ax, lit)
        rows.append((op, args, attrs, dims))
    table, ids = NodeTable(), []
    for op, args, attrs, dims in rows:   # hash-consed like a certificate's table
        ids.append(table.add(op, [ids[a] for a in args], attrs, dims))
    return table


@settings(max_examples=150, deadline=None)
@given(_tables())
def test_varying_table_is_the_plain_walk(table):
    assert varying_table(table) == _plain_varying(table)


@settings(max_examples=150, deadline=None)
@given(_tables())
def test_equal_signatures_are_equal_op_dims_arity_and_typed_attrs(table):
    sig, cutvar = signatures(table)
    ak = table._akeys
    for i, (op, args, attrs, dims) in enumerate(table.nodes):
        assert cutvar[i] == (op == "INPUT" and _is_cut_name(attrs[0]))
        for j, (oj, aj, tj, dj) in enumerate(table.nodes):
            plain = (op == oj and dims == dj and len(args) == len(aj)
                     and (ak[i][1][1:] == ak[j][1][1:] if op == "INPUT" else ak[i] == ak[j]))
            assert (sig[i] == sig[j]) == plain, (table.nodes[i], table.nodes[j])


def test_signatures_tell_one_from_true():
    table = NodeTable()
    for lit in (1, True, 1, "1"):
        table.add("ALL_REDUCE", (), ("dp", lit), ())
    sig, _ = signatures(table)
    assert len(table) == 3 and len(set(sig)) == 3


@pytest.fixture(scope="module")
def cert():
    return two_row_parallel_certificate()


def _forged(tmp_path, c, *rows):
    c = json.loads(json.dumps(c))
    c["nodes"].extend(rows)
    p = tmp_path / "c.json"
    write_certificate(p, c)
    return p


def _row(c, op, dims_len=None):
    """The first row of ``op`` (with that many dims) and its index."""
    for i, r in enumerate(c["nodes"]):
        if r[0] == op and (dims_len is None or len(r[3]) == dims_len):
            return i, r
    raise AssertionError(op)


def test_a_row_ill_typed_only_in_its_args_dims_is_rejected(tmp_path, cert):
    """The same op, attrs and dims as a well-typed ``ALL_REDUCE``, over an operand of other
    dims: its typecheck key differs, so it is typechecked (and rejected)."""
    _, (op, args, attrs, dims) = _row(cert, "ALL_REDUCE")
    j = next(k for k, r in enumerate(cert["nodes"]) if r[3] != cert["nodes"][args[0]][3])
    p = _forged(tmp_path, cert, [op, [j], attrs, dims])
    with pytest.raises(CertificateError, match="ill-typed"):
        check_certificate(p, retrace=False)
    check_certificate(_forged(tmp_path, cert), retrace=False)   # the unforged one passes


def test_a_row_ill_typed_only_in_its_attrs_type_is_rejected(tmp_path, cert):
    """A ``SHARD`` whose dim is named by the integer ``1`` rather than a string: its attrs key
    (typed) differs from every well-typed row's."""
    _, (op, args, attrs, dims) = _row(cert, "SHARD")
    p = _forged(tmp_path, cert, [op, args, [1, attrs[1]], dims])
    with pytest.raises(CertificateError) as ei:
        check_certificate(p, retrace=False)
    n = len(cert["nodes"])
    assert f"node table: node {n} (SHARD) is ill-typed: operand has no dim 1" in str(ei.value)


def test_a_repeated_dims_tuple_with_an_unknown_dim_is_rejected(tmp_path, cert):
    """``check_sizes`` computes sizes once per dims tuple: a new tuple naming a dim the
    binding lacks is still checked, at the first row that has it."""
    n = len(cert["nodes"])
    row = ["INPUT", [], ["zz", "param", "real"], [["Q", []]]]
    p = _forged(tmp_path, cert, row, ["EXP", [n], [], [["Q", []]]])
    with pytest.raises(CertificateError, match=f"node {n}: dim Q is not a dim of the binding"):
        check_certificate(p, retrace=False)
