"""``prove --torch`` on train files with a square ``nn.Linear(h, h)`` whose two dims the program
combines (round 23's a19, ``ATTEMPTS.md``: once refused, exit 3, "repeated dim in ['h', 'h']";
the naming mechanism and its float64 checks are ``test_twin_dims.py``).

Plans in ``pp_plans/``: a residual ``h + sq(h)`` on pipeline stage 0 of 2 (GPipe, 2
micro-batches) x hand DP on dp 2, right and with ``sq.weight``'s gradient doubled on stage 0;
round 23's a19 itself (a shared square layer at two depths, one per stage, its copies summed
over pp); and the non-pipelined path (hand DP): the layer applied twice, and a residual. Wall
seconds of ``prove --torch --no-check`` on the shared 2-core machine: 55-135 s each, so every
test here is ``slow``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.adversarial.torch_prove import prove

pytestmark = pytest.mark.slow

PLANS = Path(__file__).resolve().parent / "pp_plans"


@pytest.mark.parametrize("name,goals", [
    ("square_pp_dp.py", 12),             # 109 s
    ("square_twice_ddp.py", 12),         # 56 s
    ("square_residual_ddp.py", 12),
    ("square_ddp.py", 12),               # no twins: proved before too (29 s)
])
def test_a_square_layer_is_proved(name, goals, tmp_path):
    out = prove(PLANS / name, tmp_path)
    assert out.get("verdict") == "EQUIVALENT" and out["_rc"] == 0, out
    assert out["counts"]["open"] == 0, out["counts"]
    if goals is not None:
        assert out["counts"]["total"] == goals, out["counts"]


def test_round23_a19_is_no_longer_refused_and_is_proved(tmp_path):
    # a19 itself: the shared square layer at two depths, one per stage, its copies' gradients
    # all-reduced over pp. Traced, lowered and typed (was exit 3, "repeated dim"); its shared
    # layer's 8 goals were left open by the rewriting (UNKNOWN, 143 s) until a later
    # normaliser change; found EQUIVALENT at stop 52 (at e2ba3aa already: 16 goals, 12 by
    # rewriting, 4 reused, 33-47 s). Right plan (gloo truth of the gain form, r23_14b)
    out = prove(PLANS / "square_shared_pp_right.py", tmp_path)
    assert out.get("verdict") == "EQUIVALENT" and out["_rc"] == 0, out
    assert out["counts"]["refuted"] == 0 and out["counts"]["total"] == 16, out["counts"]
    assert out["counts"]["open"] == 0, out["counts"]
