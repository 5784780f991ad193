"""Adversarial round 39a (``tests/adversarial/ATTEMPTS.md``, "Round 39a"), against main at
6e50b4f (activation checkpointing: ``wrapper_names``, ``step_state``'s ``_abc_registry`` and
``_dynamo_cache``, e505167; one pool of capture children, b9ecc58). Plans in
``plans/round39a/``. Truth: ``tests/adversarial/torch4_truth.py FILE 1`` (dp 2, gloo, float64;
``FILE 2`` for the plans wrong from step 2).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND39A = Path(__file__).resolve().parent / "plans" / "round39a"


def _not_accepted(out: dict) -> bool:
    """Anything but EQUIVALENT (NOT EQUIVALENT, UNKNOWN or a refusal)."""
    return out["_rc"] != 0 and out.get("verdict") != "EQUIVALENT"


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND39A / name, tmp_path)


# -- findings (R39a-1, 4 fixed at stop 39; R39a-2, 3, 5, 6 at stop 40) ----------------------------


@pytest.mark.slow
def test_r39a_1_plain_swap_blocks_is_not_accepted(tmp_path):
    """EQUIVALENT at 6e50b4f (4 goals, 73 s); truth a.weight 0.63, b.weight 0.63. Fixed
    (stop 39, ``wrapper_names.check_names_kept``): exit 3 "parallelize moved 'b'" (15 s)."""
    out = _prove("r39a_01_dp_plain_swap_blocks_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r39a_1_fake_wrapper_swapped_blocks_is_not_accepted(tmp_path):
    """EQUIVALENT at 6e50b4f (4 goals, 63 s); truth as r39a_01 (0.63). Fixed (stop 39,
    ``check_names_kept``): exit 3 (12 s)."""
    out = _prove("r39a_02_dp_fake_wrapper_swapped_blocks_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r39a_2_ac_then_fully_shard_is_equivalent(tmp_path):
    """exit 3 at 6e50b4f (19 s, Base.forward: aten.mm.default got mixed torch.Tensor and DTensor);
    truth 5.6e-17 / 0 (right). Fixed (stop 40, ``dataparallel._recompute_hooks``: the
    recomputation in the backward gets the unit's gathered parameters): EQUIVALENT (18 s)."""
    out = _prove("r39a_06_dp_ac_then_fully_shard_right.py", tmp_path)
    assert _equivalent(out), out


# -- sound outcomes: asserted ---------------------------------------------------------------------


@pytest.mark.slow
def test_r39a_checkpoint_use_reentrant_true_is_equivalent(tmp_path):
    """EQUIVALENT at 6e50b4f (6 goals, 60 s); truth 2.8e-17 / 0 / 6.9e-18 (right)."""
    out = _prove("r39a_03_dp_checkpoint_use_reentrant_true_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
def test_r39a_checkpoint_sequential_is_equivalent(tmp_path):
    """EQUIVALENT at 6e50b4f (51 s); truth 5.6e-17 / 0 (right)."""
    out = _prove("r39a_04_dp_checkpoint_sequential_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
def test_r39a_selective_ac_context_fn_is_equivalent(tmp_path):
    """EQUIVALENT at 6e50b4f (67 s); truth 5.6e-17 / 0 (right)."""
    out = _prove("r39a_05_dp_selective_ac_context_fn_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
def test_r39a_offload_wrapper_is_equivalent(tmp_path):
    """EQUIVALENT at 6e50b4f (53 s); truth 5.6e-17 / 0 (right)."""
    out = _prove("r39a_07_dp_offload_wrapper_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
def test_r39a_3_dynamo_disable_cache_swapped_callback_is_not_accepted(tmp_path):
    """EQUIVALENT at 6e50b4f (4 goals, 79 s); truth step 2 w1 0.011, w2 0.014. Still
    EQUIVALENT at 0a0faea (21 s): the model calls ``torch.utils.checkpoint.checkpoint``
    directly, so the function is reached only through torch's module globals, which
    ``process_state`` reads by code, not attributes; ``_dynamo_cache`` (now also requiring the
    context's callback to be None) is not on this path. Fixed (stop 40,
    ``process_state._from_user``: a torch function's foreign ``__dynamo_disable`` is the
    user's): UNKNOWN (22 s, "torch namespace torch.distributed.algorithms._checkpoint.
    checkpoint_wrapper")."""
    out = _prove("r39a_11_dp_dynamo_disable_cache_swapped_callback_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r39a_fully_shard_block_and_root_without_ac_is_equivalent(tmp_path):
    """EQUIVALENT at 6e50b4f (69 s); truth 5.6e-17 / 0 (right): r39a_06's control."""
    out = _prove("r39a_12_dp_fully_shard_block_and_root_no_ac_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
def test_r39a_pool_user_error_on_rank1_at_real_sizes_is_reported(tmp_path):
    """exit 3 at 6e50b4f (56 s), naming line 42 and the user's ValueError."""
    out = _prove("r39a_08_dp_user_error_rank1_real_sizes_only.py", tmp_path)
    assert out["_rc"] == 3, out
    assert ":42:" in out["_err"] and "rank 1 at the real sizes only" in out["_err"], out


@pytest.mark.slow
def test_r39a_pool_spec_error_at_real_sizes_is_reported(tmp_path):
    """exit 3 at 6e50b4f (36 s), naming line 42 and the single-device step's ValueError."""
    out = _prove("r39a_09_dp_spec_error_real_sizes_only.py", tmp_path)
    assert out["_rc"] == 3, out
    assert ":42:" in out["_err"] and "single-device step at the real sizes" in out["_err"], out


@pytest.mark.slow
def test_r39a_4_generic_alias_subclass_state_is_not_accepted(tmp_path):
    """EQUIVALENT at 6e50b4f (4 goals, 44 s); truth step 2 0.0033 / 0.0024. Fixed (stop 39:
    only ``type(v) is types.GenericAlias`` is read as an alias)."""
    out = _prove("r39a_13_dp_generic_alias_subclass_state_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r39a_5_ac_block_in_eval_mode_is_equivalent(tmp_path):
    """exit 3 at 6e50b4f (13 s, wrapper_names' training clash); truth 5.6e-17 / 0 (right).
    Fixed (stop 40: torch's wrapper's own flag is compared as a change of the step only, its
    block's as the step leaves it): EQUIVALENT."""
    out = _prove("r39a_14_dp_ac_block_in_eval_mode_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
def test_r39a_6_user_abc_model_base_is_equivalent(tmp_path):
    """UNKNOWN at 6e50b4f (33 s, opaque _abc._abc_data); truth 0 / 0 (right). Fixed (stop 40:
    the encoder's class case reads ``_abc_impl`` by its registry): EQUIVALENT (58 s)."""
    out = _prove("r39a_15_dp_user_abc_model_base_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
def test_r39a_abc_registry_same_qualname_swap_is_not_accepted(tmp_path):
    """UNKNOWN at 6e50b4f (70 s), by R39a-6's opaque class; truth step 2 0.0033. Guards a fix
    of R39a-6: the registry must not be compared by the registered classes' names only.
    EQUIVALENT with R39a-6 fixed and the registry read by names and code (stop 40, before its
    classes were also read by identity); UNKNOWN after (39 s, "the parallel step changes
    module <model> class MLP")."""
    out = _prove("r39a_10_dp_abc_registry_same_qualname_swap_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r39a_6_fix_still_compares_the_abc_registry(tmp_path):
    """r39a_16 (stop 40, with the R39a-6 fix): the parallel step registers ``float`` with the
    model's abstract base, doubling the next forward on the ranks: UNKNOWN (57 s)."""
    out = _prove("r39a_16_dp_user_abc_model_registered_in_step_wrong.py", tmp_path)
    assert _not_accepted(out), out

