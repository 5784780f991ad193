"""The exporter's prediction of Coq's sign analysis (``proofs/coq_signs.py``, ``Signs.v``) against
the Python checker's (``proofs/checker_signs.py``), on random node tables (issue 17).

A Coq checker tests the Python rule's sign guard with Coq's sets; that guard is no weaker than
the Python one because Coq's set of every node holds the Python set, and a node Coq calls
defined the Python analysis calls defined. The Coq side of this is ``Signs.sg_sound`` and the
rules of ``Signs.sg_node``; this test checks the same two facts of their Python transcription
(the one the exporter routes steps with), on tables of the ops the analyses treat.
"""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from proofs.checker_signs import Signs
from proofs.coq_signs import ANY, NEG, POS, ZERO, CoqSigns, spow
from proofs.kernel import NodeTable

B = [["B", []]]
EXPONENTS = ["-2/1", "-1/1", "-1/2", "1/2", "1/1", "2/1", "3/1", "-3/2", "0/1"]
CONSTS = ["-3/1", "0/1", "1/100", "2/1"]


@st.composite
def tables(draw) -> list:
    rows: list = [["INPUT", [], ["x", "data", "positive"], B],
                  ["INPUT", [], ["w", "data", "real"], B],
                  ["INPUT", [], ["m", "data", "mask"], B]]
    for _ in range(draw(st.integers(1, 12))):
        k = len(rows)
        pick = st.integers(0, k - 1)
        dims = lambda i: rows[i][3]
        op = draw(st.sampled_from(["CONST", "POW", "MUL", "ADD", "EINSUM", "EXP", "SIGMOID",
                                   "NEG", "RECIP", "SQRT", "RSQRT", "LOG"]))
        if op == "CONST":
            row = ["CONST", [], [{"q": draw(st.sampled_from(CONSTS))}], []]
        elif op == "POW":
            a = draw(pick)
            row = ["POW", [a], [{"q": draw(st.sampled_from(EXPONENTS))}], dims(a)]
        elif op in ("MUL", "ADD"):
            xs = draw(st.lists(pick, min_size=1, max_size=3))
            row = [op, xs, [], B if any(dims(x) for x in xs) else []]
        elif op == "EINSUM":
            xs = draw(st.lists(pick, min_size=1, max_size=3))
            row = ["EINSUM", xs, [[]], []]
        else:
            a = draw(pick)
            row = [op, [a], [], dims(a)]
        if row not in rows:
            rows.append(row)
    return rows


@given(tables())
def test_coq_sets_hold_the_python_sets_and_coq_definedness_implies_python(rows) -> None:
    py = Signs(NodeTable.from_json(rows))
    coq = CoqSigns(rows, set())
    for i in range(len(rows)):
        assert py.sign(i) & ~coq.sign[i] == 0, (i, rows[i], py.sign(i), coq.sign[i])
        assert not coq.dfn[i] or py.defined(i), (i, rows[i])


def test_coq_sets_of_the_sign_facts_the_dp_example_needs() -> None:
    """x positive, w real: eps + sum_B w^2 > 0 (an RMSNorm denominator), exp > 0, its
    inverse defined; a mask's total and a sigmoid are any sign for Coq (no mask domain,
    SIGMOID arbitrary)."""
    rows = [["INPUT", [], ["x", "data", "positive"], B],
            ["INPUT", [], ["w", "data", "real"], B],
            ["POW", [1], [{"q": "2/1"}], B],
            ["EINSUM", [2], [[]], []],
            ["CONST", [], [{"q": "1/100"}], []],
            ["ADD", [4, 3], [], []],                       # 5: 1/100 + sum w^2
            ["POW", [5], [{"q": "-1/2"}], []],             # 6
            ["EXP", [1], [], B],                           # 7
            ["POW", [7], [{"q": "-1/1"}], B],              # 8
            ["INPUT", [], ["m", "data", "mask"], B],
            ["EINSUM", [9], [[]], []],                     # 10: the mask's total
            ["SIGMOID", [1], [], B]]                       # 11
    coq = CoqSigns(rows, set())
    assert [coq.sign[i] for i in (0, 2, 3, 5, 6, 7, 8)] == [POS, ZERO | POS, ZERO | POS, POS,
                                                           POS, POS, POS]
    assert coq.dfn[6] and coq.dfn[8]
    assert coq.sign[10] == ANY and coq.sign[11] == ANY
    assert Signs(NodeTable.from_json(rows)).sign(10) == POS      # the Python analysis's domain


def test_coq_power_signs_are_total() -> None:
    """Coq's rpow is 0 where the real power is undefined: (-v)^(1/2) = 0, 0^-1 = 0."""
    assert spow(NEG, Fraction(1, 2)) == ZERO
    assert spow(ZERO, Fraction(-1)) == ZERO
    assert spow(NEG, Fraction(2)) == POS
    assert spow(NEG, Fraction(-1)) == NEG | POS
    assert spow(ZERO, Fraction(0)) == ZERO | POS
