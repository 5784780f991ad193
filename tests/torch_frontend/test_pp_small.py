"""One small real pipelined ``prove --torch`` in the default suite (the rest of the pipelining
path's proves are ``slow``: ``test_pp_prove.py``, ``tests/adversarial/test_round22.py``).

The plans are round 22's 2-layer MLP split in 2 stages, ``ScheduleGPipe`` with 2 micro-batches,
pp 2 x dp 2 (``tests/adversarial/plans/round22/``; gloo truth in ``ATTEMPTS.md``, "Round 22"):
the right step (truth 5.6e-17) is EQUIVALENT, the mutant that divides the gradients by the
micro-batch count on top of ``scale_grads`` (truth: grad 0.15, plan = spec / 2) is refuted.
About 35-60 s each on the shared 2-core machine (measured, docs/torch.md "Pipelining"); the
mutant is ``slow`` (the default suite's 10-minute budget)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.adversarial.torch_prove import prove

ROUND22 = Path(__file__).resolve().parents[1] / "adversarial" / "plans" / "round22"


@pytest.mark.parametrize("name,verdict,rc", [
    ("r22_00_mlp_pp_dp.py", "EQUIVALENT", 0),
    # (the suite's budget: the mutant runs with the slow tests, as test_round22's do)
    pytest.param("r22_14_double_mb_scale.py", "NOT EQUIVALENT", 1, marks=pytest.mark.slow),
])
def test_a_small_pipeline_is_proved_and_its_mutant_refuted(name, verdict, rc, tmp_path):
    out = prove(ROUND22 / name, tmp_path)
    assert out.get("verdict") == verdict and out["_rc"] == rc, out
    if verdict == "EQUIVALENT":
        assert out["counts"]["total"] == 8 and out["counts"]["open"] == 0, out["counts"]
    else:   # plan = spec / 2 (n = 2 micro-batches divided twice)
        cx = out["counterexample"]
        assert cx["goal"].startswith("grad:") and cx["ratio"] is not None, cx
        assert abs(float(cx["ratio"]) - 0.5) < 1e-9, cx
