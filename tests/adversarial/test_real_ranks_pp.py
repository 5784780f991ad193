"""R4-7 on the pipelined path (stop 32): a dp rank of a pp x dp plan that is wrong only at the
real sizes (``plans/round32r/r32r_01_pp_dp_rank1_real_size.py``: dp rank 1 doubles its
averaged gradient when its local batch is the real 4). Before stop 32 the other dp
coordinates' stages were traced at probe sizes only: EQUIVALENT (as main at a43a49e); now every
coordinate's stages are traced at the real sizes too and composed, and
``real_ranks.check_real_ranks`` refuses it (exit 3). The control, ``r22_00``, stays EQUIVALENT
(``tests/torch_frontend/test_pp_small.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

PLANS = Path(__file__).resolve().parent / "plans" / "round32r"


@pytest.mark.slow
def test_a_dp_rank_wrong_only_at_the_real_sizes_under_pp_is_refused(tmp_path):
    from tests.adversarial.torch_prove import prove

    out = prove(PLANS / "r32r_01_pp_dp_rank1_real_size.py", tmp_path)
    assert out["_rc"] == 3, out
    assert "rank {'dp': 1} at the real sizes" in out["_err"], out["_err"][-2000:]
