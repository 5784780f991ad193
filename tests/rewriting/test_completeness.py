"""The normaliser's completeness on equivalent spellings (issue 12, item 1).

``rewriting/spellings.py`` draws two natural spellings of one value (and the gradients of
``sum(value * w)``); both must agree numerically in float64 (else the generator is wrong), and
every pair in scope must be proved by rewriting alone: equal normal forms, or the prover's exact
``cas`` step on the differing subterms. The documented limitations (``docs/rules.md`` section 7)
are asserted to still be misses, so that a rule that closes one shows up here and the docs get
updated. Rates are printed by ``bench/completeness.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewriting.spellings import FAMILIES, classify, draw_pair
from spec_lang.evaluate import evaluate, sample_inputs

from rw_helpers import HypothesisDraw, RandomDraw, aligned

LIMITATIONS = {
    # (family, what, kind): why (docs/rules.md section 7)
    ("scalars", "c (x + y) vs c x + c y", "grad"): "contraction of a sum vs sum of contractions",
    ("scalars", "c (x - y) vs c x - c y", "grad"): "contraction of a sum vs sum of contractions",
    ("unit_dim", "sum_G(x y) vs sum_G(x) sum_G(y)", "grad"): "gradient of a size-1 squeeze",
    ("unit_dim", "einsum over G vs product of squeezes", "grad"): "gradient of a size-1 squeeze",
    ("split_reduction", "sum of two chunks vs the sum", "value"): "sum over explicit chunks",
    ("split_reduction", "sum of two chunks vs the sum", "grad"): "sum over explicit chunks",
}


def _agree(a, b, bd) -> None:
    rng = np.random.default_rng(0)
    vals = evaluate([a, b], bd, sample_inputs([a, b], bd, rng), rng=rng)
    p, q = aligned(vals[a], vals[b])
    np.testing.assert_allclose(p, q, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("family", sorted(FAMILIES))
@settings(max_examples=25)
@given(data=st.data())
def test_equal_spellings_are_proved_by_rewriting(family, data):
    pair = draw_pair(HypothesisDraw(data), family)
    for kind, (a, b) in [("value", (pair.a, pair.b))] + [("grad", g) for g in pair.grads]:
        _agree(a, b, pair.binding)
        if (family, pair.what, kind) in LIMITATIONS:
            continue
        assert classify(a, b, pair.binding) != "miss", f"{family}: {pair.what} ({kind})"


@pytest.mark.parametrize("key", sorted(LIMITATIONS), ids=lambda k: f"{k[0]}:{k[2]}")
def test_documented_limitations_are_still_misses(key):
    """Each limitation has an instance that is still a miss (close it: update the docs)."""
    family, what, kind = key
    for seed in range(400):
        pair = draw_pair(RandomDraw(seed), family)
        if pair.what != what:
            continue
        items = [(pair.a, pair.b)] if kind == "value" else list(pair.grads)
        if any(classify(a, b, pair.binding) == "miss" for a, b in items):
            return
    pytest.fail(f"no miss left for {key}: remove it from LIMITATIONS and docs/rules.md")
