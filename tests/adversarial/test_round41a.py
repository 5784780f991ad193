"""Adversarial round 41a (``tests/adversarial/ATTEMPTS.md``, "Round 41a"), against wip/sac41 at
ec31448 (selective activation checkpointing traced as eager runs it, ``eager_paths``; the
recomputation's FSDP2 / replicate gather outside SAC's dispatch modes,
``recompute.outside_selective_checkpoint``). Plans in ``plans/round41a/``. Truth:
``tests/adversarial/torch4_truth.py FILE 2`` (dp 2, gloo, float64, two steps).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND41A = Path(__file__).resolve().parent / "plans" / "round41a"


def _not_accepted(out: dict) -> bool:
    """Anything but EQUIVALENT (NOT EQUIVALENT, UNKNOWN or a refusal)."""
    return out["_rc"] != 0 and out.get("verdict") != "EQUIVALENT"


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND41A / name, tmp_path)


# -- findings (R41a-1 fixed at stop 41) ----------------------------------------------------------


@pytest.mark.slow
def test_r41a_1_fsdp_sac_cached_weight_transpose_is_not_accepted(tmp_path):
    """EQUIVALENT at ec31448 (4 goals, 133 s); truth step 1 w1 0.0018, w2 0.013 (wrong: SAC's
    cached ``aten.t`` of the gathered w1 is a view of FSDP2's unsharded storage, which the
    backward's all-gather refills with the w1 the step doubled). Fixed (stop 41: a fully_shard
    parameter written between its forward all-gather and the backward is refused,
    recompute.gathered_then_written): exit 3."""
    out = _prove("r41a_11_fsdp_sac_saves_weight_transpose_param_scaled_wrong.py", tmp_path)
    assert _not_accepted(out), out


# -- sound outcomes ----------------------------------------------------------------------------


@pytest.mark.slow
def test_r41a_sac_cache_mutation_allowed_is_not_accepted(tmp_path):
    """NOT EQUIVALENT at ec31448 (4 refuted, 41 s); truth 0.0078 / 0.077 (wrong)."""
    out = _prove("r41a_01_sac_cache_mutation_allowed_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r41a_sac_cache_mutation_default_is_refused(tmp_path):
    """exit 3 at ec31448 (20 s); the real run raises (cached tensor mutated)."""
    out = _prove("r41a_02_sac_cache_mutation_default_raises.py", tmp_path)
    assert out["_rc"] == 3, out


@pytest.mark.slow
def test_r41a_sac_save_all_fsdp_unit_inside_region_is_refused_by_design(tmp_path):
    """EQUIVALENT at ec31448 (4 goals, 54 s); truth 5.6e-17 (right). Refused since stop 41 (exit
    3, 10 s), by design: a save-every-operator policy saves views (``aten.view``) of the
    root unit's gathered parameters, which R41c-4's fix refuses under fully_shard
    (recompute.saved_alias_refused: the capture does not tell a view of a gathered weight
    from a view of an activation)."""
    out = _prove("r41a_03_sac_save_all_fsdp_unit_inside_region_right.py", tmp_path)
    assert out["_rc"] == 3 and "saves the output of aten.view" in out["_err"], out


@pytest.mark.slow
def test_r41a_sac_policy_closure_counter_is_not_accepted(tmp_path):
    """UNKNOWN at ec31448 (96 s: the closure cell is read); truth step 2 w3 0.0051 (wrong)."""
    out = _prove("r41a_04_sac_policy_closure_counter_second_step_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r41a_sac_inside_full_ac_global_changed_is_not_accepted(tmp_path):
    """NOT EQUIVALENT at ec31448 (143 s); truth step 1 w3 0.0042 (wrong)."""
    out = _prove("r41a_05_sac_inside_full_ac_global_changed_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r41a_sac_policy_itertools_counter_is_not_accepted(tmp_path):
    """UNKNOWN at ec31448 (114 s: opaque itertools.count global); truth step 2 w3 0.0051."""
    out = _prove("r41a_10_sac_policy_itertools_counter_second_step_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r41a_fsdp_full_ac_param_scaled_is_not_accepted(tmp_path):
    """NOT EQUIVALENT at ec31448 (132 s); truth 0.0018 / 0.013 (wrong). Control of R41a-1."""
    out = _prove("r41a_12_fsdp_full_ac_param_scaled_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r41a_fsdp_sac_saves_mm_param_scaled_is_refused_by_design(tmp_path):
    """EQUIVALENT at ec31448 (151 s); truth 0 / 0 (right). Control of R41a-1. Refused since
    stop 41 (exit 3), by design: any write to a fully_shard parameter between its forward
    all-gather and the backward is refused (R41a-1's fix); here no saved value aliases the
    gathered weight, which the capture does not tell apart."""
    out = _prove("r41a_13_fsdp_sac_saves_mm_param_scaled_right.py", tmp_path)
    assert out["_rc"] == 3 and "written in place between its all-gather" in out["_err"], out


@pytest.mark.slow
def test_r41a_sac_saves_weight_transpose_param_scaled_is_not_accepted(tmp_path):
    """NOT EQUIVALENT at ec31448 (146 s); truth 0.0018 / 0.013 (wrong). R41a-1 without FSDP2."""
    out = _prove("r41a_14_sac_saves_weight_transpose_param_scaled_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r41a_sac_under_user_dispatch_mode_is_not_accepted(tmp_path):
    """NOT EQUIVALENT at ec31448 (185 s); truth step 1 w2 0.0064 (wrong)."""
    out = _prove("r41a_07_sac_under_user_dispatch_mode_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r41a_sac_cached_view_mutation_allowed_is_not_accepted(tmp_path):
    """NOT EQUIVALENT at ec31448 (181 s); truth 0.0018 / 0.013 (wrong)."""
    out = _prove("r41a_15_sac_saves_weight_transpose_param_scaled_mutation_allowed_wrong.py",
                 tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r41a_replicate_sac_is_equivalent(tmp_path):
    """EQUIVALENT at ec31448 (183 s); truth 5.6e-17 (right)."""
    out = _prove("r41a_09_replicate_sac_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
def test_r41a_fsdp_sac_no_reshard_after_forward_is_equivalent(tmp_path):
    """EQUIVALENT at ec31448 (164 s); truth 5.6e-17 (right)."""
    out = _prove("r41a_08_fsdp_sac_no_reshard_after_forward_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
def test_r41a_fsdp_sac_inside_full_ac_is_equivalent(tmp_path):
    """EQUIVALENT at ec31448 (173 s); truth 5.6e-17 (right)."""
    out = _prove("r41a_06_fsdp_sac_inside_full_ac_right.py", tmp_path)
    assert _equivalent(out), out
