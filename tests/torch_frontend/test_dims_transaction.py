"""``Dims.transaction``: an op's rule that raises ``DimsError`` leaves no join, split, lineage,
atom or mark behind (round 53a, R53a-1: a failed ``same`` kept the pairs it had joined, and a
dim of no spec origin kept a spec name while the analysis went on)."""

from __future__ import annotations

import pytest

from spec_lang.torch_frontend.dims import Dims, DimsError, Marks


def _fail():
    raise DimsError("t.py:9: no")


def test_a_failed_rule_undoes_joins_splits_lineage_atoms_and_marks():
    d, marks = Dims(axis_sizes={"tp": 2}), Marks()
    x = d.fresh(6, "t.py:1")
    y = d.fresh(6, "t.py:1", info=("h#0", ()))
    z = d.fresh(4, "t.py:1")
    marks["kept"] = ("before",)
    n_atoms = len(d.atoms)
    with pytest.raises(DimsError), d.transaction(marks):
        d.unify(x, y, "t.py:2")                     # x takes y's lineage
        parts = d.split(z, (2, 2), "t.py:3")
        marks["kept"] = ("overwritten",)
        marks["new"] = ("added",)
        marks.setdefault("also", ("added",))
        assert d.find(x) is d.find(y) and len(parts) == 2
        _fail()
    assert d.find(x) is x and d.find(y) is y and d.info(x) is None
    assert d.find(z).parts is None and len(d.atoms) == n_atoms
    assert dict(marks) == {"kept": ("before",)} and marks.log is None


def test_path_compression_inside_a_failed_rule_is_undone():
    d = Dims()
    a, b, c = (d.fresh(5, "t.py:1") for _ in range(3))
    d.unify(a, b, "t.py:1")                          # outside: kept
    root_ab = d.find(a)
    with pytest.raises(DimsError), d.transaction():
        d.unify(root_ab, c, "t.py:2")                # a chain a -> b -> c (or a -> c)
        d.find(a)                                     # compresses a's path to the new root
        _fail()
    assert d.find(a) is root_ab and d.find(b) is root_ab and d.find(c) is c


def test_a_failed_same_is_all_or_nothing_inside_a_rule_that_goes_on():
    d = Dims()
    p, q = d.fresh(3, "t.py:1"), d.fresh(3, "t.py:1")
    u, v = d.fresh(2, "t.py:1"), d.fresh(5, "t.py:1")
    with d.transaction():
        d.unify(p, q, "t.py:2")                       # the rule's own join, before the same()
        with pytest.raises(DimsError):
            d.same([u, p], [v, q], "t.py:3")          # sizes 2 vs 5: no alignment
        assert d.find(u) is u and d.find(v) is v      # the failed same() left nothing
    assert d.find(p) is d.find(q)                     # the rule's join stands


def test_a_successful_rule_keeps_everything():
    d, marks = Dims(), Marks()
    x, y = d.fresh(7, "t.py:1"), d.fresh(7, "t.py:1", info=("k#0", ()))
    with d.transaction(marks):
        d.unify(x, y, "t.py:2")
        marks["m"] = (1,)
    assert d.find(x) is d.find(y) and d.info(x) == ("k#0", ()) and marks == {"m": (1,)}
    assert marks.log is None
