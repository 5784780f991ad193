"""Regressions for the adversarial report adv3 (the pipeline model after the adv2 fixes).

Each test failed before its fix (they were EQUIVALENT). Plan files: ``tests/bugs/plans_adv3/``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from proofs.prover import prove
from spec_lang import load
from spec_lang.errors import PlanError

PLANS = Path(__file__).resolve().parent / "plans_adv3"


@pytest.mark.parametrize("name, line, stage", [
    ("s07_pp_avg_in_stage_code", 45, 0),      # both stages all-reduce different values over pp
    ("s05_token_count_over_pp", 46, 1),       # only the last stage issues it: a hang
    ("s08_region_over_pp", 48, 1),            # a differentiable region over pp in stage code
])
def test_pp_collective_inside_stage_code_is_a_plan_error(name, line, stage):
    """Stage code runs on one pp coordinate; a pp collective there hangs or pairs with another
    stage's unrelated call. The composed trace used to simplify it away (EQUIVALENT)."""
    with pytest.raises(PlanError, match=rf"{name}\.py:{line}: collective over the pipeline axis "
                       rf"'pp' inside the code of pipeline stage {stage}"):
        load(PLANS / f"{name}.py")


def test_one_seed_forked_and_unforked_is_unknown():
    """Stage 0 draws from RngStream(1234, fork='pp'), stage 1 from RngStream(1234): with
    Megatron's seed + 100 * pp_rank, stage 0 reuses stage 1's draws. Was EQUIVALENT."""
    report = prove(load(PLANS / "r02_forked_and_unforked_same_seed.py"), timeout_s=60)
    assert report.verdict == "UNKNOWN"
    assert all("streams with seed 1234 are forked on () and (pp)" in g.reason
               for g in report.open_goals)
