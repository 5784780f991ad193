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


def test_round23_a19_is_no_longer_refused_and_its_shared_layer_is_left_open(tmp_path):
    # a19 itself: the shared square layer at two depths, one per stage, its copies' gradients
    # all-reduced over pp. Traced, lowered and typed now (was exit 3, "repeated dim"); the
    # other goals are proved, the shared layer's are left open by the rewriting (its stage
    # copies rename the twins at different places than the single-device step): UNKNOWN,
    # and the refuter finds no difference (gloo truth of the gain form, r23_14b: right)
    out = prove(PLANS / "square_shared_pp_right.py", tmp_path)          # 143 s
    assert out.get("verdict") == "UNKNOWN" and out["_rc"] == 2, out
    assert out["counts"]["refuted"] == 0 and out["counts"]["total"] == 16, out["counts"]
    assert sorted(o["goal"] for o in out["open"]) == sorted(
        f"{g}mid.{p}{s}" for g in ("", "grad:") for p in ("weight", "bias") for s in ("", "@pp1"))


def test_a_transposed_square_weight_is_refuted(tmp_path):
    # only the positions of the two same-size dims tell W from W^T
    out = prove(PLANS / "square_twice_ddp_transposed_buggy.py", tmp_path)
    assert out.get("verdict") == "NOT EQUIVALENT" and out["_rc"] == 1, out


def test_a_doubled_square_gradient_is_refuted_at_its_parameter(tmp_path):
    out = prove(PLANS / "square_pp_dp_grad_x2_buggy.py", tmp_path)     # 135 s
    assert out.get("verdict") == "NOT EQUIVALENT" and out["_rc"] == 1, out
    cx = out["counterexample"]
    assert cx["goal"] == "grad:sq.weight", cx
    assert abs(float(cx["ratio"]) - 2.0) < 1e-9, cx
    assert cx["site"].endswith("square_pp_dp_grad_x2_buggy.py:84"), cx
    assert "pipeline stage 0 of 2" in cx["placement"], cx
