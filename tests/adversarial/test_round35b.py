"""Adversarial round 35b (``tests/adversarial/ATTEMPTS.md``, "Round 35b"), against wip/adv35b at
14ad0e4 (= main: 15c1844's flat gradient buckets, ``spec_lang/torch_frontend/buckets.py``).
Plans in ``plans/round35b/``. Truth: ``tests/adversarial/torch4_truth.py FILE 2`` (dp),
``tests/adversarial/tp_truth.py FILE`` (dp x tp); gloo, float64.

No false accept was found: every wrong bucket plan tried was NOT EQUIVALENT, UNKNOWN or refused.

* R35b-1 (false refusal; ``r35b_06``): gradients as *views* of the bucket
  (``p.grad = flat[a:b].view_as(p)``, Megatron's contiguous buffer) and the bucket divided after
  the views are taken: UNKNOWN, "an in-place write through a slice of a tensor that is read
  again" (``lower._write_back``). Truth 2.8e-17.
* R35b-2 (false refusal; ``r35b_11``): the bucket split back with ``flat.split(sizes)``
  (``aten.split_with_sizes``): UNKNOWN, no lowering rule. Truth 2.8e-17.
* R35b-3 (false refusal; ``r35b_13``): the bucket written into a preallocated buffer with
  ``torch.cat(gs, out=buf)`` (``aten.cat.out``): UNKNOWN, no lowering rule. Truth 2.8e-17.

All three fixed in round 36 (``ATTEMPTS.md`` "Round 36: fixes (buckets)"; their mutants in
``test_round36_bucket.py``): the strict xfails are asserted tests now.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND35B = Path(__file__).resolve().parent / "plans" / "round35b"


def _not_accepted(out: dict) -> bool:
    """Anything but EQUIVALENT (NOT EQUIVALENT, UNKNOWN or a refusal)."""
    return out["_rc"] != 0 and out.get("verdict") != "EQUIVALENT"


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND35B / name, tmp_path)


# -- findings (fixed in round 36: asserted) ----------------------------------------------------

@pytest.mark.slow
def test_r35b_1_grad_views_of_bucket_then_div_is_equivalent(tmp_path):
    """UNKNOWN at 14ad0e4 (4 open goals, aten.div_ at line 60: "an in-place write through a slice
    of a tensor that is read again", 20 s); truth 2.8e-17. Round 36 (``buckets.piece_read``):
    EQUIVALENT (17 s)."""
    out = _prove("r35b_06_dp_bucket_grad_views_then_div_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
def test_r35b_2_bucket_split_back_is_equivalent(tmp_path):
    """UNKNOWN at 14ad0e4 (4 open goals, aten.split_with_sizes at line 55, 40 s); truth
    2.8e-17. Round 36 (``rules_layout.SplitWithSizes``, ``buckets._split``): EQUIVALENT
    (17 s)."""
    out = _prove("r35b_11_dp_bucket_split_back_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
def test_r35b_3_bucket_cat_out_is_equivalent(tmp_path):
    """UNKNOWN at 14ad0e4 (4 open goals, aten.cat.out at line 53, 15 s); truth 2.8e-17. Round 36
    (``rules_layout.CatOut``, ``lower.OUT_WRITES``): EQUIVALENT (27 s)."""
    out = _prove("r35b_13_dp_bucket_cat_out_megatron_right.py", tmp_path)
    assert _equivalent(out), out


# -- sound outcomes (asserted) --------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("name", [
    "r35b_01_dp_bucket_order_real_only_wrong.py",        # exit 3: view's argument at real sizes
    "r35b_02_dp_bucket_order_by_rank_wrong.py",          # exit 3: dataflow differs at rank 1
    "r35b_03_dp_bucket_transposed_flatten_wrong.py",     # NOT EQUIVALENT
    "r35b_04_dp_bucket_inplace_one_piece_wrong.py",      # NOT EQUIVALENT (round 37: piece_write)
    "r35b_05_dp_bucket_grad_views_then_zero_wrong.py",   # NOT EQUIVALENT (round 38: filled)
    "r35b_07_dp_bucket_allreduce_max_wrong.py",          # NOT EQUIVALENT
    "r35b_08_dp_bucket_rank_scalar_tensor_wrong.py",     # exit 3: rank-built constant
    "r35b_09_dp_bucket_cat_args_order_real_only_wrong.py",   # exit 3: cat's argument
    "r35b_16_dp_bucket_size_dependent_divisor_wrong.py",     # UNKNOWN: size-dependent literal
    "r35b_14_dp_tp_bucket_reduced_over_tp_too_wrong.py",     # NOT EQUIVALENT: 2 x spec (dp x tp)
    "r35b_15_dp_bucket_rank_python_divisor_wrong.py",   # UNKNOWN: rank constant (round 36, 15 s)
])
def test_wrong_bucket_plan_is_not_accepted(name, tmp_path):
    """Wrong bucket plans (truth >= 0.0026 after step 1, docstrings): never EQUIVALENT."""
    out = _prove(name, tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
@pytest.mark.parametrize("name", [
    "r35b_10_dp_flatten_dense_tensors_right.py",     # torch._utils' (un)flatten: 28 s
    "r35b_12_dp_bucket_negative_bounds_right.py",    # narrow + negative start: 59 s
    "r35b_17_dp_bucket_add_scaled_bucket_right.py",  # two buckets' arithmetic (round 36): 15 s
])
def test_right_bucket_plan_is_equivalent(name, tmp_path):
    """Right bucket plans (truth 2.8e-17): EQUIVALENT at 14ad0e4."""
    out = _prove(name, tmp_path)
    assert _equivalent(out), out
