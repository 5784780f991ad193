"""Every rule is sound: both sides of a random instance agree in float64 (STYLE rule 12).

One hypothesis test, parametrised over the registry; the instance comes from the sampler
declared under the rule (shapes with at least two shards per split dim). Both sides must be
defined (finite) at the same elements and equal there. A meta-test fails when a rule has no
sampler. The zero cases of the cancelling rules are in ``test_definedness.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rewriting import EXPLORE, RULES
from spec_lang.evaluate import evaluate, sample_inputs

from rw_helpers import HypothesisDraw, aligned


def test_every_rule_has_a_sampler():
    missing = [r.name for r in RULES + EXPLORE if r.sample is None]
    assert not missing, f"rules without an instance sampler: {missing}"


def test_rule_names_are_unique_and_documented():
    names = [r.name for r in RULES + EXPLORE]
    assert len(names) == len(set(names))
    assert all(r.law for r in RULES)


@pytest.mark.parametrize("rule", RULES + EXPLORE, ids=lambda r: r.name)
@given(data=st.data())
def test_rule_is_sound(rule, data):
    lhs, binding = rule.sample(HypothesisDraw(data))
    s = rule.match(lhs, binding)
    assert s is not None, f"{rule.name}: the sampler's instance {lhs!r} does not match"
    assert rule.lhs(s) is lhs, f"{rule.name}: lhs(σ) does not rebuild the instance"
    assert rule.guard(s, binding)
    rhs = rule.rhs(s, binding)
    assert set(rhs.dims) == set(lhs.dims), f"{rule.name} changed the dims"
    seed = data.draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    inputs = sample_inputs([lhs, rhs], binding, rng)
    vals = evaluate([lhs, rhs], binding, inputs, rng=rng)
    x, y = aligned(vals[lhs], vals[rhs])
    ok = np.isfinite(x)
    # both sides are defined at the same elements (a NaN plan value never becomes finite:
    # rewriting/signs.py), and equal there
    np.testing.assert_array_equal(np.isfinite(y), ok, err_msg=f"{rule.name}: definedness "
                                  f"differs: {lhs!r} vs {rhs!r}")
    np.testing.assert_allclose(y[ok], x[ok], rtol=1e-10, atol=1e-10,
                               err_msg=f"{rule.name}: {lhs!r} vs {rhs!r}")
