"""Adversarial round 17 (``tests/adversarial/ATTEMPTS.md``, "Round 17"): the checker after
``ERF`` joined the kernel's op table (stop 25). No forged certificate with ``ERF`` nodes was
accepted (20 edits, two z3 forgeries); the findings are wrong NOT EQUIVALENT verdicts that
``check-certificate`` accepted, none caused by ``ERF``:

* R17-2 (fixed) ``r17_01`` / ``r17_02``: a witness where the *spec* is NaN counted as a
  divergence (``proofs/replay.differs``: "finite on one side only"). ``r17_01`` divides by
  ``max(n, 1)`` where the spec divides by a token count ``n`` (0/0 on a fully padded sequence,
  outside the spec's domain: the certificate itself assumes ``sum(m over S) != 0``); it is
  EQUIVALENT. ``r17_02`` (spec ``x n / n``, plan ``x``) is UNKNOWN.
* R17-1 (open, strict xfail) ``r17_03`` / ``r17_04``: round-off that an ill-conditioned
  ``1 + erf(u)`` (or ``tanh``) near its floor magnifies past the replay's ``RTOL`` (the spec's
  argument passes through ``+ 10^10 - 10^10``, one float64 step of 2e-6); the two sides are
  equal over the reals and rewriting proves it, but the float counterexample comes first.
  A fix needs the witness re-evaluated in higher precision (or a proof tried before a float-only
  counterexample is reported).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from proofs.cli import prove_main
from proofs.replay import differs

ROUND17 = Path(__file__).resolve().parent / "plans" / "round17"


def test_the_plan_not_finite_where_the_spec_is_differs_and_not_the_reverse():
    spec = np.array([1.0, np.nan, np.inf, 2.0, np.nan])
    plan = np.array([np.nan, 3.0, 4.0, 2.0, np.nan])
    assert differs(spec, plan).tolist() == [True, False, False, False, False]
    assert differs(np.array([1.0, 2.0]), np.array([1.0, 2.1])).tolist() == [False, True]


@pytest.mark.parametrize("name,verdict,code", [
    ("r17_01_clamped_token_count.py", "EQUIVALENT", 0),
    ("r17_02_spec_nan_plan_finite.py", "UNKNOWN", 2),
])
def test_a_witness_outside_the_specs_domain_is_no_counterexample(name, verdict, code, capsys):
    got = prove_main([str(ROUND17 / name), "--no-check"])
    out = capsys.readouterr().out
    assert got == code and out.startswith(verdict + ":"), (got, out[:500])


@pytest.mark.xfail(strict=True, reason="R17-1 (open): float round-off magnified by an "
                   "ill-conditioned erf/tanh is taken for a divergence")
@pytest.mark.parametrize("name", ["r17_03_erf_cancellation.py", "r17_04_tanh_cancellation.py"])
def test_round_off_magnified_by_erf_or_tanh_is_no_counterexample(name, capsys):
    got = prove_main([str(ROUND17 / name), "--no-check"])
    out = capsys.readouterr().out
    assert got != 1 and not out.startswith("NOT EQUIVALENT"), out[:500]
