"""Round 38: ``zero_()`` / ``fill_(v)`` of a flat gradient bucket (``buckets.FILLS`` /
``buckets.filled``; R37b-4, Megatron's ``zero_grad_buffer``; ``tests/adversarial/ATTEMPTS.md``,
"Round 38: fixes (bucket zero_)").

Each ``*_wrong.py`` plan in ``plans/round38/`` is a wrong variant of the new rule (its
docstring says how; truth ``torch4_truth.py FILE 2``): none may be EQUIVALENT. The right plan
(a zero through a whole view and ``mul_(0)`` of the pieces) must be EQUIVALENT.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND38 = Path(__file__).resolve().parent / "plans" / "round38"

# measured on wip/bkt38 (ATTEMPTS.md "Round 38"): the outcome each wrong plan gets today
EXPECTED = {
    "r38_01_dp_megatron_zero_after_allreduce_wrong.py": "NOT EQUIVALENT",
    "r38_02_dp_megatron_zero_straddling_slice_wrong.py": "UNKNOWN",
    "r38_03_dp_megatron_zero_each_piece_between_microbatches_wrong.py": "NOT EQUIVALENT",
    "r38_04_dp_megatron_zero_on_rank0_only_wrong.py": "exit 3",
    "r38_05_dp_megatron_fill_one_instead_of_zero_wrong.py": "NOT EQUIVALENT",
    "r38_06_dp_megatron_zero_row_of_a_piece_wrong.py": "UNKNOWN",
    "r38_07_dp_megatron_zero_then_read_view_taken_before_wrong.py": "NOT EQUIVALENT",
    "r38_09_dp_megatron_rank_dependent_mul_zero_wrong.py": "UNKNOWN",
    "r38_10_dp_megatron_zero_block_of_a_piece_wrong.py": "exit 3",
    "r38_11_dp_megatron_zero_then_rectangular_view_t_wrong.py": "UNKNOWN",
}


def _outcome(out: dict) -> str:
    return "exit 3" if out["_rc"] == 3 else str(out.get("verdict"))


def test_every_wrong_plan_has_an_expected_outcome():
    """Not slow: the table above names every wrong plan of the directory."""
    assert sorted(EXPECTED) == sorted(p.name for p in ROUND38.glob("r38_*_wrong.py"))
    assert "EQUIVALENT" not in EXPECTED.values()


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_round38_zero_mutant_is_not_accepted(name, tmp_path):
    """Wrong plans: never EQUIVALENT, and the outcome measured (a refutation where the zero is
    lowered)."""
    from tests.adversarial.torch_prove import prove

    out = prove(ROUND38 / name, tmp_path)
    assert out["_rc"] != 0 and out.get("verdict") != "EQUIVALENT", out
    assert _outcome(out) == EXPECTED[name], out


@pytest.mark.slow
def test_round38_zero_through_whole_view_and_mul_zero_is_equivalent(tmp_path):
    """Right (truth 6e-17 / 6e-17): ``buf.view(-1).zero_()`` and ``m.mul_(0)`` of each piece
    before the first micro-batch. EQUIVALENT on wip/bkt38 (41 s)."""
    from tests.adversarial.torch_prove import prove

    out = prove(ROUND38 / "r38_08_dp_megatron_zero_through_whole_view_and_mul_zero_right.py",
                tmp_path)
    assert out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT", out
