"""Merkle hashes of a node table (``proofs.kernel.node_hash_table``, issue 14's certificate
speed-up): the memoised spelling gives exactly the bytes, hence the hashes, of the one-call
reference ``node_hash_table_plain`` (``docs/certificate.md``, "Nodes"), on random tables with
every attribute form a certificate allows and on a real plan's certificate table."""

from fractions import Fraction
from pathlib import Path

import sympy
from hypothesis import given
from hypothesis import strategies as st

from proofs.kernel import NodeTable, from_terms, node_hash_table
from spec_lang.load import load
from tests.proofs.hash_reference import node_hash_table_plain

ROOT = Path(__file__).resolve().parents[2]


_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2 ** 63) + 1, 2 ** 63 - 1),
    st.text(max_size=6),                                 # quotes, backslashes, non-ASCII
    st.fractions(max_denominator=50).map(Fraction),
    st.sampled_from([sympy.sqrt(2), 1 / sympy.sqrt(128), 1 + sympy.sqrt(3)]))
_attrs = st.lists(st.one_of(_scalars, st.tuples(_scalars, _scalars),
                            st.frozensets(st.integers(0, 5), max_size=3)), max_size=3)
_dims = st.lists(st.tuples(st.sampled_from(["B", "S", "D", "h\u00e9", 'q"']),
                           st.lists(st.sampled_from(["dp", "tp", "#0/2"]), max_size=2)
                           .map(tuple)), max_size=3).map(tuple)


@given(st.lists(st.tuples(st.sampled_from(["INPUT", "ADD", "MUL", "EINSUM", "CONST"]),
                          st.lists(st.integers(0, 10 ** 6), max_size=3), _attrs, _dims),
                min_size=1, max_size=25))
def test_memoised_hashes_equal_the_reference_on_random_tables(rows):
    t = NodeTable()
    for op, args, attrs, dims in rows:
        n = len(t)
        t.add(op, [a % n for a in args] if n else [], attrs, dims)
    assert node_hash_table(t) == node_hash_table_plain(t)


def test_equal_attributes_of_other_encodings_keep_their_own_hashes():
    """``1 == True == Fraction(1)`` and so are sets of them: a memo keyed by equality would
    give a later node an earlier node's encoding, and its hash would depend on the table's
    order (found in review of the memoised spelling)."""
    t = NodeTable()
    for op, attrs in [("ADD", (frozenset({1}),)), ("MUL", (frozenset({True}),)),
                      ("NEG", ((1, Fraction(1)),)), ("EXP", ((True, 1),)),
                      ("LOG", (1,)), ("SQRT", (True,)), ("RECIP", (Fraction(1),))]:
        t.add(op, [], attrs, ())
    hs = node_hash_table(t)
    assert hs == node_hash_table_plain(t) and len(set(hs)) == len(t)


def test_memoised_hashes_equal_the_reference_on_a_real_plan():
    problem = load(ROOT / "examples" / "llama_debug_megatron_3d.py")
    t = NodeTable()
    from_terms(t, [x for g in problem.goals for x in (g.expected, g.actual)])
    hs = node_hash_table(t)
    assert len(t) > 1000 and len(set(hs)) == len(t)     # hash-consed: one hash per node
    assert hs == node_hash_table_plain(t)


def test_hash_consing_keeps_sets_of_equal_members_of_other_types_apart():
    """``NodeTable.add`` / ``find`` and ``from_json``'s duplicate check key attributes
    exactly: ``frozenset({1})`` and ``frozenset({True})`` (equal in Python, encoded ``[1]`` and
    ``[true]``) are two nodes, each found as itself; before stop 31 the second ``add`` returned
    the first node (its set members were not tagged with their types)."""
    t = NodeTable()
    a = t.add("ADD", [], (frozenset({1}),), ())
    b = t.add("ADD", [], (frozenset({True}),), ())
    c = t.add("ADD", [], ((frozenset({1}), Fraction(2)),), ())
    d = t.add("ADD", [], ((frozenset({True}), 2),), ())
    assert len({a, b, c, d}) == 4
    assert t.find("ADD", [], (frozenset({True}),), ()) == b
    assert t.find("ADD", [], (frozenset({1}),), ()) == a
    assert t.find("ADD", [], (frozenset({1.0}),), ()) is None      # float: not an attribute
    back = NodeTable.from_json(t.to_json())           # no row is taken for a duplicate
    assert back.nodes == t.nodes and [type(next(iter(n[2][0]))) for n in back.nodes[:2]] \
        == [int, bool]


def test_find_over_is_find_of_the_nodes_fields_over_other_children():
    """Issue 14: ``find_over(n, args)`` (the checker's substitution lookup) is
    ``find(op, args, attrs, dims)`` of node ``n``'s fields, with the attribute key kept when
    ``n`` was added, in a built table and in one read back from JSON; attributes equal in
    Python but of other types (``1`` / ``True`` / ``Fraction(1)``) stay apart."""
    t = NodeTable()
    x = t.add("INPUT", [], ("x", "data", "real"), (("B", ()),))
    y = t.add("INPUT", [], ("y", "data", "real"), (("B", ()),))
    k1 = t.add("CONST", [], (1,), ())
    kt = t.add("CONST", [], (True,), ())
    kq = t.add("CONST", [], (Fraction(1),), ())
    mx = t.add("MUL", [k1, x], (), (("B", ()),))
    my = t.add("MUL", [k1, y], (), (("B", ()),))
    sx = t.add("SHARD", [x], ("B", "tp"), (("B", ("tp",)),))
    sy = t.add("SHARD", [y], ("B", "tp"), (("B", ("tp",)),))
    for tab in (t, NodeTable.from_json(t.to_json())):
        assert tab.find_over(mx, (k1, y)) == my == tab.find("MUL", [k1, y], (), (("B", ()),))
        assert tab.find_over(sx, (y,)) == sy
        assert tab.find_over(sx, (k1,)) is None                  # no such node
        assert tab.find_over(mx, (kt, y)) is None and tab.find_over(mx, (kq, x)) is None
        assert [tab.find_over(k, ()) for k in (k1, kt, kq)] == [k1, kt, kq]
