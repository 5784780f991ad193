"""The lead's review of the PyTorch front end (stop 24; ``ATTEMPTS.md`` "Lead's review, stop
24"): the literals that differ across ranks. Train files in ``plans/lead24/`` (the MLP of
``examples/torch/mlp_ddp.py``, dp = 2), each wrong on rank 1 only, the same ops on every rank:

* L24-1 ``l01_rank_sum_dim.py``: ``sum(dim=[rank])`` of the unsqueezed gradient (the identity
  on rank 0, column sums on rank 1). The list literal differs on rank 1 and the reduction's
  rule reads ``n.args`` itself: the lowered program was rank 0's. At main it was UNKNOWN only
  through F24-1 (below); past that, all 4 goals were proved by rewriting.
* L24-2 ``l02_rank_constant.py``: ``p.grad.mul_(torch.tensor(1.0 + rank))``, a constant tensor
  captured by ``make_fx`` and lowered with rank 0's value: EQUIVALENT at main (68 s).
* F24-1 (false refusal): a train file run from its own folder had ``torch.ops`` (``__file__ =
  "_ops.py"``, relative) taken for a module next to it, its op cache read as the user's state.

Truth (``torch4_truth.py``, gloo, float64, step 1): l01 0.0084 / 0.0158, l02 0.0070 / 0.0093
(w1 / w2 max abs diff from the single-device model).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.adversarial.torch_prove import prove

LEAD24 = Path(__file__).resolve().parent / "plans" / "lead24"


@pytest.mark.slow
@pytest.mark.parametrize("name, why", [
    ("l01_rank_sum_dim.py", "argument 1[0] of sum_1 (aten.sum.dim_IntList) is 1 on rank "
                            "{'dp': 1} and 0 on rank {'dp': 0}"),
    ("l02_rank_constant.py", "differs at rank {'dp': 1}"),
])
def test_a_literal_that_differs_on_a_rank_is_not_lowered_as_rank_0s(name, why, tmp_path):
    out = prove(LEAD24 / name, tmp_path)
    assert out["_rc"] == 2 and out["verdict"] == "UNKNOWN", out
    reasons = " | ".join(o["reason"] for o in out["open"])
    assert why in reasons, reasons
    assert f"{name}:" in reasons, reasons        # the user's line


@pytest.mark.slow
@pytest.mark.parametrize("name", ["l01_rank_sum_dim.py", "l02_rank_constant.py"])
def test_the_lead24_files_really_train_differently(name):
    from tests.adversarial.torch4_truth import run
    diffs = run(str(LEAD24 / name), 1)[0]
    assert max(diffs.values()) > 5e-3, diffs
