"""The reduction adversary (issue 10, deliverable 3): pairs built to agree at small sizes.

For every generated pair ``(L, R)`` at real sizes (``reduction_pairs.py``):

(a) where the admissibility check (``proofs/admissible.py``) allows a reduced binding and z3
    proves the two sides equal there (the prover's premise), they agree on random float64 inputs
    at several larger sizes of every reduced class (``need + 1``, ``need + 2`` and twice the
    unit: past the real size too, since Theorems A and B claim every size);
(b) where the two sides differ at the real sizes, ``prove`` never says EQUIVALENT, with the
    refuter switched off so that only proofs (rewriting, cas, z3 at the allowed sizes) decide.

The counts are asserted at the end of each run so that the adversary cannot silently stop
exercising the reduced path.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proofs.admissible import analyse, proof_binding
from proofs.kernel import NodeTable, from_terms
from proofs.prover import prove
from proofs.refute import Refutation
from proofs.replay import aligned
from proofs.smt import SmtError, build_query, run_query
from spec_lang.evaluate import evaluate, sample_inputs
from spec_lang.term import Binding, Term

from reduction_pairs import FAMILIES, equal_variant, random_term, world_sizes, worlds
from terms import problem

SEEDS = (0, 1, 2)


def _values(l: Term, r: Term, b: dict[str, int], seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    bb = Binding(b)
    inputs = sample_inputs([l, r], bb, rng)
    vals = evaluate([l, r], bb, inputs, rng=rng)
    _, de, da = aligned(vals[l], vals[r])
    return np.asarray(de, dtype=float), np.asarray(da, dtype=float)


def equal_at(l: Term, r: Term, b: dict[str, int]) -> bool:
    """Equal on every draw, up to an absolute float64 tolerance scaled by the values."""
    with np.errstate(all="ignore"):
        for seed in SEEDS:
            de, da = _values(l, r, b, seed)
            ok = np.isfinite(de) & np.isfinite(da)
            if (np.isfinite(de) != np.isfinite(da)).any():
                return False
            scale = max(1.0, float(np.max(np.abs(de[ok]), initial=0.0)))
            if (np.abs(de[ok] - da[ok]) > 1e-8 * scale).any():
                return False
    return True


def larger(adm, real: dict[str, int], red: dict[str, int]) -> list[dict[str, int]]:
    """Bindings with every reduced class at need + 1, need + 2 and 2 U offsets per unit."""
    out = []
    for k in (1, 2, None):
        b = dict(red)
        for c in adm.classes:
            if c.fixed is None and any(red[d] != real[d] for d in c.dims):
                m = 2 * c.unit if k is None else c.need + k
                for d in c.dims:
                    b[d] = real[d] // c.unit * m
        out.append(b)
    return out


def z3_equal(table: NodeTable, i: int, j: int, b: dict[str, int], stats: Counter) -> bool:
    """The prover's premise: z3 proves ``i == j`` at ``b`` (False when not encodable)."""
    try:
        q = build_query(table, i, j, b, max_elements=20_000)
    except SmtError:
        stats["not encodable in z3"] += 1
        return False
    return run_query(q, 10.0) == "unsat"


@contextlib.contextmanager
def refuter_off():
    """Only proofs decide: the refute phase reports nothing."""
    with mock.patch("proofs.confirm.search", lambda *a, **k: (Refutation([], None, {}), {})):
        yield


def _check(l: Term, r: Term, real: dict[str, int], stats: Counter, name: str) -> None:
    stats["pairs"] += 1
    table = NodeTable()
    ids = from_terms(table, [l, r])
    adm = analyse(table.nodes, [ids[id(l)], ids[id(r)]], real)
    red = proof_binding(adm, real)
    reduced = red != real
    stats["reduced binding"] += reduced
    proved = reduced and z3_equal(table, ids[id(l)], ids[id(r)], red, stats)
    if proved:
        stats["z3 proves them equal at the reduced binding"] += 1
        for b in larger(adm, real, red):
            assert equal_at(l, r, b), (name, "z3-equal at", red, "but not at", b, adm)
            stats["lifted sizes checked"] += 1
    if not equal_at(l, r, real):
        stats["differ at real sizes"] += 1
        if proved:
            stats["z3-equal reduced, differ real (must be impossible)"] += 1
        with refuter_off():
            v = prove(problem([("loss", "loss", l, r)], real), timeout_s=30).verdict
        stats[f"prove: {v}"] += 1
        assert v != "EQUIVALENT", (name, real, l, r)


@pytest.mark.parametrize("fam", sorted(FAMILIES))
def test_reduction_adversary_families(fam):
    """One family built to agree at small sizes, across random real sizes: never EQUIVALENT
    where it differs at the real sizes, and z3's reduced binding never hides the difference."""
    stats: Counter = Counter()

    @settings(max_examples=max(8, settings().max_examples // 6), deadline=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(w=worlds())
    def run(w):
        l, r = FAMILIES[fam](w)
        _check(l, r, world_sizes(w), stats, fam)

    run()
    print(f"reduction adversary ({fam}):", dict(stats))
    assert stats["z3-equal reduced, differ real (must be impossible)"] == 0
    assert stats["prove: EQUIVALENT"] == 0
    assert stats["differ at real sizes"] >= 1


def test_reduction_adversary_random_terms():
    """Random terms over every op kind, paired with an equal variant or another random term."""
    stats: Counter = Counter()

    @settings(max_examples=max(60, settings().max_examples), deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(w=worlds(), l=random_term(), other=random_term(), same=st.booleans())
    def run(w, l, other, same):
        r = equal_variant(l) if same else other
        _check(l, r, world_sizes(w), stats, "random")

    run()
    print("reduction adversary (random terms):", dict(stats))
    assert stats["z3-equal reduced, differ real (must be impossible)"] == 0
    assert stats["prove: EQUIVALENT"] == 0
    assert stats["z3 proves them equal at the reduced binding"] >= 5
    assert stats["lifted sizes checked"] >= 15
