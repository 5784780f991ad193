"""Round 35 (issue 11): flat gradient buckets (``spec_lang/torch_frontend/buckets.py``), on
wip/bucket. Plans in ``plans/round35/`` and ``plans/round33b/r33b_06``. Truth:
``tests/adversarial/torch4_truth.py FILE 2`` (dp 2); gloo, float64.

A hand-written DDP that flattens the gradients into one buffer (``torch.cat`` of
``p.grad.view(-1)``), all-reduces it once and copies the slices back was UNKNOWN ("cat along a
dim that is a product of named dims"): a false refusal of DDP's / Megatron's / DeepSpeed's
pattern. The buffer is now a bucket of its pieces; a slice is a piece only when its bounds are
the piece's at the probe sizes and at the real sizes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND35 = Path(__file__).resolve().parent / "plans" / "round35"
ROUND33B = Path(__file__).resolve().parent / "plans" / "round33b"


def _not_accepted(out: dict) -> bool:
    """Anything but EQUIVALENT (NOT EQUIVALENT, UNKNOWN or a refusal)."""
    return out["_rc"] != 0 and out.get("verdict") != "EQUIVALENT"


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(path: Path, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(path, tmp_path)


# -- right plans: EQUIVALENT ----------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("path", [
    # one bucket, dist.all_reduce, div_, copy_ back (truth 2.8e-17; UNKNOWN before, 66 s): 32 s
    ROUND33B / "r33b_06_dp_flat_bucket_ddp_right.py",
    # two buckets (weights: dist.all_reduce + div_; biases: funcol.all_reduce + wait, * 1/n),
    # truth 2.8e-17: 16 s
    ROUND35 / "r35_01_dp_two_buckets_right.py",
])
def test_flat_buckets_are_equivalent(path, tmp_path):
    out = _prove(path, tmp_path)
    assert _equivalent(out), out


# -- wrong plans: never EQUIVALENT ----------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("name", [
    # w1's slice copied into w2 and w2's into w1 (same shapes; truth 0.0146): NOT EQUIVALENT, 60 s
    "r35_02_dp_bucket_swapped_params_wrong.py",
    # the buffer divided by 2 |dp| (truth 0.0066): NOT EQUIVALENT, 1/2 = 1/|dp|, 66 s
    "r35_04_dp_bucket_wrong_divisor_wrong.py",
    # only w2's gradients bucketed, w1's never reduced (truth 0.0173): NOT EQUIVALENT, 66 s
    "r35_05_dp_bucket_some_grads_wrong.py",
])
def test_wrong_buckets_are_refuted(name, tmp_path):
    out = _prove(ROUND35 / name, tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


@pytest.mark.slow
def test_a_slice_that_is_a_piece_at_the_probe_sizes_only_is_unknown(tmp_path):
    """w1's slice one entry late at the real sizes only (truth 0.016): the bounds are no equal
    block at either size, so real_moves does not compare them; buckets._slice does: UNKNOWN
    (56 s) naming the slice."""
    out = _prove(ROUND35 / "r35_03_dp_bucket_bound_real_only_wrong.py", tmp_path)
    assert out["_rc"] == 2 and out.get("verdict") == "UNKNOWN", out
    assert "piece 0 at the probe sizes" in str(out), out


@pytest.mark.slow
def test_zero_style_rank_chunk_is_not_accepted(tmp_path):
    """ZeRO by hand (the bucket chunked by the rank and all-gathered back; right, truth 5.6e-17):
    refused (exit 3, 84 s), a limit."""
    out = _prove(ROUND35 / "r35_06_dp_bucket_zero_chunk_unknown.py", tmp_path)
    assert _not_accepted(out), out
