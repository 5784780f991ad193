"""Round 36b: adversarial review of round 36's flat-bucket rules (``tests/adversarial/ATTEMPTS.md``,
"Round 36b").

Against main at 0a8840e (wip/bkt's merge 4822a36: ``buckets.piece_read`` R35b-1,
``split_with_sizes`` R35b-2, ``cat(out=)`` R35b-3). Plans in ``plans/round36b/``. Truth:
``tests/adversarial/torch4_truth.py FILE 1`` (dp 2); gloo, float64. A false accept is a strict
xfail asserting the right outcome (never EQUIVALENT); a false refusal of right code is a strict
xfail asserting EQUIVALENT; sound outcomes are asserted.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND36B = Path(__file__).resolve().parent / "plans" / "round36b"


def _not_accepted(out: dict) -> bool:
    """Anything but EQUIVALENT (NOT EQUIVALENT, UNKNOWN or a refusal)."""
    return out["_rc"] != 0 and out.get("verdict") != "EQUIVALENT"


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND36B / name, tmp_path)


# -- sound outcomes ---------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("name", [
    "r36b_03_dp_bucket_views_rebound_clone_wrong.py",           # NOT EQUIVALENT
    "r36b_04_dp_bucket_views_swapped_by_rank_wrong.py",         # UNKNOWN: rank literal
    "r36b_05_dp_bucket_views_as_strided_swapped_wrong.py",      # UNKNOWN: as_strided
    "r36b_08_dp_bucket_views_then_cat_out_doubled_wrong.py",    # NOT EQUIVALENT
    "r36b_09_dp_bucket_views_step_before_wait_wrong.py",        # UNKNOWN: async, no wait
    "r36b_13_dp_bucket_views_transposed_square_wrong.py",       # NOT EQUIVALENT
    "r36b_17_dp_bucket_after_div_rectangular_view_t_wrong.py",  # UNKNOWN: the view refused
    "r36b_18_dp_grad_rectangular_view_t_no_bucket_wrong.py",    # UNKNOWN: the view refused
    "r36b_21_dp_bucket_two_row_views_t_reshape_wrong.py",       # UNKNOWN: dims do not align
])
def test_bucket_mutant_is_not_accepted(name, tmp_path):
    """Wrong plans (truth >= 0.0053 after step 1, the docstrings): never EQUIVALENT."""
    out = _prove(name, tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
@pytest.mark.parametrize("name", [
    "r36b_06_dp_bucket_views_funcol_allreduce_copy_back_right.py",  # copy_ of funcol's result
    "r36b_10_dp_bucket_split_of_detach_views_right.py",         # split of detach, view chains
    "r36b_11_dp_bucket_padded_views_right.py",                  # a zeros(pad) piece
    "r36b_12_dp_bucket_views_narrow_unflatten_right.py",        # narrow + unflatten
    "r36b_15_dp_bucket_views_reshaped_chain_right.py",          # view(2, -1).view(-1)...
])
def test_right_bucket_variant_is_equivalent(name, tmp_path):
    """Right plans (truth 0.0 after step 1): EQUIVALENT."""
    out = _prove(name, tmp_path)
    assert _equivalent(out), out


# -- findings (open: strict xfail) ------------------------------------------------------------

# -- findings fixed (R36b-1, R36b-2: aliasing.named_path in lower._write_back) -----------------

@pytest.mark.slow
@pytest.mark.parametrize("name", [
    "r36b_14_dp_bucket_views_rectangular_view_t_wrong.py",      # slice -> view(i, o) -> t
    "r36b_20_dp_bucket_split_items_rectangular_view_t_wrong.py",    # split item -> view -> t
    "r36b_19_dp_grad_view_before_write_rectangular_t_no_bucket_wrong.py",   # R36b-2, no bucket
])
def test_r36b_1_2_view_with_no_lowering_read_after_a_write_is_unknown(name, tmp_path):
    """EQUIVALENT at 0a8840e (4 goals, 37 s / 25 s / 19 s; truth w1 0.0086, w2 0.012): a view
    pass 1 could not name, taken before a write into its storage, was given the written value.
    Now the write leaves it Opaque and the goals that read it are UNKNOWN, naming the write."""
    out = _prove(name, tmp_path)
    assert out["_rc"] == 2 and out.get("verdict") == "UNKNOWN", out
    reasons = [o["reason"] for o in out["open"]]
    assert reasons and all("read through a view shardproof cannot follow" in r for r in reasons), out


# -- findings fixed in round 37 (buckets.piece_write, zero_dims, split(m)) ----------------------

@pytest.mark.slow
@pytest.mark.parametrize("name", [
    "r36b_01_dp_bucket_views_grad_accum_two_microbatches_right.py",     # EQUIVALENT (18 s)
    "r36b_02_dp_megatron_main_grad_buffer_right.py",                    # EQUIVALENT (36 s)
])
def test_r36b_3_accumulation_into_bucket_views_is_equivalent(name, tmp_path):
    """UNKNOWN at 0a8840e (34 s / 29 s: "an in-place write through a slice of a tensor that is
    read again"); truth <= 1.7e-18 (right). Round 37: an in-place op through exactly one piece
    gives the storage the bucket with that piece replaced (``buckets.piece_write``); Megatron's
    zeroed buffer cut by its slices is a bucket of zeros (``buckets.zero_dims``)."""
    out = _prove(name, tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
def test_r36b_4_views_before_whole_copy_is_equivalent(tmp_path):
    """UNKNOWN at 0a8840e (67 s); truth 0.0 (right). Round 37: the zeroed buffer is a bucket of
    zeros (``buckets.zero_dims``), its views read the copied bucket's pieces (24 s)."""
    out = _prove("r36b_16_dp_zero_buffer_views_then_copy_bucket_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
def test_r36b_5_split_equal_chunks_is_equivalent(tmp_path):
    """UNKNOWN at 0a8840e (38 s); truth 0.0 (right). Round 37: ``flat.split(m)`` is the list of
    pieces when every piece has ``m`` entries at the probe and the real sizes (50 s)."""
    out = _prove("r36b_07_dp_bucket_split_equal_chunks_right.py", tmp_path)
    assert _equivalent(out), out
