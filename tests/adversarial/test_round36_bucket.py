"""Round 36: fixes (buckets) (``tests/adversarial/ATTEMPTS.md``, "Round 36: fixes (buckets)").

Round 35b's three false refusals of right bucket idioms are fixed (``test_round35b.py`` asserts
them now): gradients as views of the bucket written after (R35b-1, ``buckets.piece_read``),
``flat.split(numels)`` (R35b-2, ``rules_layout.SplitWithSizes``) and ``torch.cat(gs, out=buf)``
(R35b-3, ``rules_layout.CatOut``). The mutants of each new rule here must never be EQUIVALENT;
the right variants must be. Plans in ``plans/round36/``. Truth:
``tests/adversarial/torch4_truth.py FILE 2`` (dp 2); gloo, float64.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND36 = Path(__file__).resolve().parent / "plans" / "round36"


def _not_accepted(out: dict) -> bool:
    """Anything but EQUIVALENT (NOT EQUIVALENT, UNKNOWN or a refusal)."""
    return out["_rc"] != 0 and out.get("verdict") != "EQUIVALENT"


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND36 / name, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("name", [
    "r36_01_dp_bucket_views_wrong_slice_wrong.py",          # NOT EQUIVALENT
    "r36_02_dp_bucket_views_div_wrong_n_wrong.py",          # NOT EQUIVALENT
    "r36_03_dp_bucket_views_div_twice_wrong.py",            # NOT EQUIVALENT
    "r36_04_dp_bucket_views_then_rebound_div_wrong.py",     # NOT EQUIVALENT
    "r36_06_dp_bucket_views_before_allreduce_only_wrong.py",    # NOT EQUIVALENT
    "r36_08_dp_bucket_split_wrong_order_wrong.py",          # UNKNOWN: not the pieces
    "r36_09_dp_bucket_split_off_by_one_wrong.py",           # exit 3: a slice at real sizes
    "r36_10_dp_bucket_split_probe_only_wrong.py",           # exit 3: dataflow at real sizes
    "r36_11_dp_bucket_cat_out_one_too_long_unknown.py",     # UNKNOWN: out= of another shape
    "r36_12_dp_bucket_cat_out_order_real_only_wrong.py",    # exit 3: dataflow at real sizes
    "r36_13_dp_bucket_cat_out_bf16_buffer_wrong.py",        # UNKNOWN: out= of another dtype
    "r36_16_dp_bucket_views_then_copy_swapped_bucket_wrong.py",  # UNKNOWN: piece of other dims
    "r36_15_dp_bucket_cat_out_slice_of_buffer_wrong.py",    # UNKNOWN: a slice of no block
])
def test_bucket_mutant_is_not_accepted(name, tmp_path):
    """Mutants of the round-36 rules (truth >= 1.8e-5 after step 1, except r36_11: torch
    resizes the buffer, truth 0; the docstrings): never EQUIVALENT."""
    out = _prove(name, tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
@pytest.mark.parametrize("name", [
    "r36_05_dp_bucket_views_before_allreduce_right.py",     # views, all_reduce, div_
    "r36_07_dp_bucket_split_views_then_div_right.py",       # views of split pieces, div_
    "r36_14_dp_bucket_cat_out_views_then_div_right.py",     # cat(out=), views, all_reduce, div_
])
def test_right_bucket_variant_is_equivalent(name, tmp_path):
    """Right variants of the fixed idioms (truth <= 5.6e-17): EQUIVALENT."""
    out = _prove(name, tmp_path)
    assert _equivalent(out), out
