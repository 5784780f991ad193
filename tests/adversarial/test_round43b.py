"""Adversarial round 43b (``tests/adversarial/ATTEMPTS.md``, "Round 43b"), against
``merge/ppleaf43`` at 7319f22: PP x FSDP2's faithful stand-in (``spec_lang/torch_frontend/
pp_leaves.py``, ``pp_data_parallel.py``): the reduction, reads around the step, activation
checkpointing. Plans in ``plans/round43b/``. Truth: ``tests/torch_frontend/pp_truth.py FILE``.
All slow (every prove traces several processes).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND43B = Path(__file__).resolve().parent / "plans" / "round43b"

pytestmark = pytest.mark.slow


def _not_accepted(out: dict) -> bool:
    """Anything but EQUIVALENT (NOT EQUIVALENT, UNKNOWN or a refusal)."""
    return out["_rc"] != 0 and out.get("verdict") != "EQUIVALENT"


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND43B / name, tmp_path)


# -- findings ---------------------------------------------------------------------------------


def test_r43b_1_frozen_parameters_of_a_fully_shard_stage_are_proved(tmp_path):
    """R43b-1: exit 3 at 7319f22 (136 s): "the parallel step produces
    'grad:tok_embeddings.weight', which the single-device step does not" (``StepLeaves.leaf``
    called ``requires_grad_(True)`` for every parameter); truth: the real run leaves the frozen
    parameters' ``.grad`` None, as the spec. Since the leaf follows the stored parameter's
    ``requires_grad`` (stop 43): EQUIVALENT (105 goals, 75 s)."""
    out = _prove("r43b_01_frozen_params_gpipe_right.py", tmp_path)
    assert _equivalent(out), out


def test_r43b_2_parameter_frozen_for_the_step_is_not_accepted(tmp_path):
    """R43b-2: EQUIVALENT at 7319f22 (107 goals, 105 s); truth: ``norm.weight`` gets no
    gradient for real (FSDP2's unsharded parameter copies ``requires_grad=False``), its update
    3.3e-4 off the spec's; the stand-in's leaf required grad and computed the spec's update.
    Since stop 43: exit 3 (114 s), "the parallel step does not produce ['grad:norm.weight']"."""
    out = _prove("r43b_08_frozen_in_step_then_unfrozen_wrong.py", tmp_path)
    assert _not_accepted(out), out


# -- sound outcomes ---------------------------------------------------------------------------


def test_r43b_uneven_micro_batches_are_refused(tmp_path):
    """3 micro-batches of 4 local rows (1F1B): every rank fails for real; exit 3 (34 s)."""
    out = _prove("r43b_02_three_uneven_microbatches_1f1b_wrong.py", tmp_path)
    assert out["_rc"] == 3, out


def test_r43b_selective_ac_1f1b_three_micro_batches_is_equivalent(tmp_path):
    """torchtitan's op SAC, 1F1B, 3 micro-batches: right (4.2e-17); EQUIVALENT 107 (180 s)."""
    out = _prove("r43b_03_sac_1f1b_three_microbatches_right.py", tmp_path)
    assert _equivalent(out), out


def test_r43b_clip_one_micro_batch_zero_grads_kept_is_not_refuted(tmp_path):
    """torchtitan's clip over pp, one micro-batch, ``zero_grad(set_to_none=False)``: right
    (4.3e-18); UNKNOWN at 7319f22 (150 s: only ``grad_left`` goals open, ``_foreach_zero_`` had
    no lowering). Since stop 44 (``_foreach_zero_`` lowered as ``0 * x``): EQUIVALENT (78 s)."""
    out = _prove("r43b_04_clip_pp_one_microbatch_zero_grads_right.py", tmp_path)
    assert _equivalent(out), out


def test_r43b_tied_weight_across_fsdp_stages_synced_is_equivalent(tmp_path):
    """Tied embedding / head, local shards all-reduced over pp: right (2.2e-16); EQUIVALENT
    107 (162 s)."""
    out = _prove("r43b_05_tied_across_stages_fsdp_sync_right.py", tmp_path)
    assert _equivalent(out), out


def test_r43b_tied_weight_across_fsdp_stages_not_synced_is_refuted(tmp_path):
    """r43b_05 without the pp sync: wrong (grad 0.11, update 6.0e-4); NOT EQUIVALENT (189 s,
    8 refuted)."""
    out = _prove("r43b_06_tied_across_stages_fsdp_no_sync_wrong.py", tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


def test_r43b_frozen_on_the_parallel_path_only_is_not_accepted(tmp_path):
    """norm frozen in ``parallelize`` only: wrong (no gradient for real, update 3.3e-4);
    UNKNOWN at 7319f22 (157 s, every goal proved; the step-state check on ``requires_grad``)."""
    out = _prove("r43b_07_frozen_on_parallel_path_only_wrong.py", tmp_path)
    assert _not_accepted(out), out
