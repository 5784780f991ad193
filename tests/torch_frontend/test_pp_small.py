"""One small real pipelined ``prove --torch`` in the default suite (the rest of the pipelining
path's proves are ``slow``: ``test_pp_prove.py``, ``tests/adversarial/test_round22.py``).

The plans are round 22's 2-layer MLP split in 2 stages, ``ScheduleGPipe`` with 2 micro-batches:
``pp_plans/mlp_pp.py`` on pp 2 alone (the default suite's), round 22's pp 2 x dp 2
(``tests/adversarial/plans/round22/``; gloo truth in ``ATTEMPTS.md``, "Round 22": the right
step, truth 5.6e-17, is EQUIVALENT; the mutant that divides the gradients by the micro-batch
count on top of ``scale_grads``, truth grad 0.15, plan = spec / 2, is refuted). The pp x dp
pair is ``slow`` (the default suite's 10-minute budget)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.adversarial.torch_prove import prove

ROUND22 = Path(__file__).resolve().parents[1] / "adversarial" / "plans" / "round22"
PP_PLANS = Path(__file__).resolve().parent / "pp_plans"


@pytest.mark.parametrize("path,verdict,rc,goals", [
    # pp 2 alone: the default suite's pipelined prove (pp 2 x dp 2 traces half again as many
    # ranks: 83 s against 122 s at load 5, stop 55)
    (PP_PLANS / "mlp_pp.py", "EQUIVALENT", 0, 9),
    # (the suite's budget: these run with the slow tests, as test_round22's do)
    pytest.param(ROUND22 / "r22_00_mlp_pp_dp.py", "EQUIVALENT", 0, 8, marks=pytest.mark.slow),
    pytest.param(ROUND22 / "r22_14_double_mb_scale.py", "NOT EQUIVALENT", 1, None,
                 marks=pytest.mark.slow),
], ids=lambda x: x.name if isinstance(x, Path) else None)
def test_a_small_pipeline_is_proved_and_its_mutant_refuted(path, verdict, rc, goals, tmp_path):
    out = prove(path, tmp_path)
    assert out.get("verdict") == verdict and out["_rc"] == rc, out
    if verdict == "EQUIVALENT":   # the loss (on pp 2 alone) + 4 parameters x (grad, update)
        assert out["counts"]["total"] == goals and out["counts"]["open"] == 0, out["counts"]
    else:   # plan = spec / 2 (n = 2 micro-batches divided twice)
        cx = out["counterexample"]
        assert cx["goal"].startswith("grad:") and cx["ratio"] is not None, cx
        assert abs(float(cx["ratio"]) - 0.5) < 1e-9, cx
