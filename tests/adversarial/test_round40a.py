"""Adversarial round 40a (``tests/adversarial/ATTEMPTS.md``, "Round 40a"), against main at
05940a8 (activation checkpointing under FSDP2 / replicate, ``dataparallel._recompute_hooks``;
torch functions' own attributes, ``process_state._fn_attrs``; an ABC's registry by identity).
Plans in ``plans/round40a/``. Truth: ``tests/adversarial/torch4_truth.py FILE 2`` (dp 2, gloo,
float64, two steps).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND40A = Path(__file__).resolve().parent / "plans" / "round40a"


def _not_accepted(out: dict) -> bool:
    """Anything but EQUIVALENT (NOT EQUIVALENT, UNKNOWN or a refusal)."""
    return out["_rc"] != 0 and out.get("verdict") != "EQUIVALENT"


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND40A / name, tmp_path)


# -- findings (R40a-1..5 fixed at stop 40, R40a-6 at stop 41) ---------------------------------


@pytest.mark.slow
def test_r40a_1_dynamo_disable_partial_is_not_accepted(tmp_path):
    """EQUIVALENT at 05940a8 (4 goals, 20 s); truth step 2 w1 0.011, w2 0.014.
    Fixed (stop 40: a torch function whose `__dynamo_disable` is not torch's own form is read as
    the user's (process_state._from_user): UNKNOWN)."""
    out = _prove("r40a_01_dp_dynamo_disable_partial_scale_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r40a_1_dynamo_disable_closure_is_not_accepted(tmp_path):
    """EQUIVALENT at 05940a8 (4 goals, 38 s); truth step 2 w1 0.011, w2 0.014.
    Fixed (stop 40: a torch function whose `__dynamo_disable` is not torch's own form is read as
    the user's (process_state._from_user): UNKNOWN)."""
    out = _prove("r40a_02_dp_dynamo_disable_closure_scale_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r40a_2_abc_positive_cache_is_not_accepted(tmp_path):
    """EQUIVALENT at 05940a8 (4 goals, 35 s); truth step 2 w1 0.011, w2 0.014.
    Fixed (stop 40: a user ABC's positive and current negative caches are read
    (step_state._abc_registry): UNKNOWN)."""
    out = _prove("r40a_04_dp_abc_positive_cache_by_subclasshook_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r40a_3_fsdp_checkpoint_called_in_forward_is_equivalent(tmp_path):
    """exit 3 at 05940a8 (14 s, mixed torch.Tensor and DTensor); truth 5.6e-17 / 0, 5.6e-17 /
    5.6e-17 (right).
    Fixed (stop 40: the recomputation is found by torch's own recompute frames and every module of
    a unit gets the views (recompute.recompute_hooks): EQUIVALENT)."""
    out = _prove("r40a_05_dp_fsdp_checkpoint_called_in_forward_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
def test_r40a_3_replicate_reentrant_checkpoint_in_forward_is_equivalent(tmp_path):
    """NOT EQUIVALENT at 05940a8 (6 goals, 4 refuted, 36 s); truth 2.8e-17 / 0 / 6.9e-18,
    2.8e-17 / 0 / 1.4e-17 (right).
    Fixed (stop 40: the recomputation is found by torch's own recompute frames and every module of
    a unit gets the views (recompute.recompute_hooks): EQUIVALENT)."""
    out = _prove("r40a_06_dp_replicate_reentrant_checkpoint_in_forward_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
def test_r40a_4_block_called_in_backward_is_not_accepted(tmp_path):
    """EQUIVALENT at 05940a8 (6 goals, 41 s); the real FSDP2 run raises (aten.mm mixed
    torch.Tensor and DTensor: the block's unit is resharded after its post-backward).
    Fixed (stop 40: views only during torch's recomputation: FSDP2 exit 3 (mixed Tensor / DTensor,
    as the real run raises); replicate NOT EQUIVALENT (its real run raises too))."""
    out = _prove("r40a_07_fsdp_block_called_in_backward_by_function_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r40a_4_replicate_block_called_in_backward_is_not_accepted(tmp_path):
    """EQUIVALENT at 05940a8 (6 goals, 39 s); the real DDP run raises ("Expected to mark a
    variable ready only once").
    Fixed (stop 40: views only during torch's recomputation: FSDP2 exit 3 (mixed Tensor / DTensor,
    as the real run raises); replicate NOT EQUIVALENT (its real run raises too))."""
    out = _prove("r40a_08_replicate_block_called_in_backward_by_function.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r40a_5_replicate_two_backwards_is_not_accepted(tmp_path):
    """EQUIVALENT at 05940a8 (4 goals, 34 s); truth step 1 w1 0.0027, w2 0.0022; step 2 w1
    0.0039, w2 0.0020 (DDP's reducer does not all-reduce the second backward's gradient).
    Fixed (stop 40: torch.autograd.grad over a unit's parameters and replicate's second backward
    are refused (recompute.reduction_refused): exit 3)."""
    out = _prove("r40a_09_replicate_two_backwards_retain_graph_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r40a_5_replicate_autograd_grad_is_not_accepted(tmp_path):
    """EQUIVALENT at 05940a8 (4 goals, 39 s); truth step 1 w1 0.0088, w2 0.018 (DDP does not
    reduce a gradient autograd.grad returns).
    Fixed (stop 40: torch.autograd.grad over a unit's parameters and replicate's second backward
    are refused (recompute.reduction_refused): exit 3)."""
    out = _prove("r40a_11_replicate_autograd_grad_assigned_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r40a_5_fsdp_autograd_grad_is_not_accepted(tmp_path):
    """EQUIVALENT at 05940a8 (4 goals, 41 s); truth step 1 w1 0.0070, w2 0.0093.
    Fixed (stop 40: torch.autograd.grad over a unit's parameters and replicate's second backward
    are refused (recompute.reduction_refused): exit 3)."""
    out = _prove("r40a_12_fsdp_autograd_grad_assigned.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r40a_6_fsdp_selective_ac_no_early_stop_is_equivalent(tmp_path):
    """exit 3 at 05940a8 (13 s, "aten.view.default encountered during backward but not found in
    storage"); truth 5.6e-17 / 0, 5.6e-17 / 5.6e-17 (right). Fixed (stop 41: the
    recomputation's gather runs outside SAC's dispatch modes, recompute.
    outside_selective_checkpoint): EQUIVALENT (19 s)."""
    out = _prove("r40a_13_fsdp_selective_ac_no_early_stop_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
def test_r40a_6_fsdp_selective_ac_is_equivalent(tmp_path):
    """exit 3 at 05940a8 (13 s, as r40a_13); truth 5.6e-17 / 0, 5.6e-17 / 5.6e-17 (right).
    Fixed (stop 41, as r40a_13): EQUIVALENT (22 s)."""
    out = _prove("r40a_14_fsdp_selective_ac_right.py", tmp_path)
    assert _equivalent(out), out


# -- sound outcomes: asserted ---------------------------------------------------------------------


@pytest.mark.slow
def test_r40a_fsdp_two_backwards_is_equivalent(tmp_path):
    """EQUIVALENT at 05940a8 (4 goals, 39 s); truth 2.8e-17 / 3.5e-18 both steps (right)."""
    out = _prove("r40a_10_fsdp_two_backwards_retain_graph.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
def test_r40a_abc_register_then_registry_clear_is_equivalent(tmp_path):
    """EQUIVALENT at 05940a8 (4 goals, 27 s); truth 5.6e-17 / 0, 5.6e-17 / 5.6e-17 (right: the
    registry clear empties the positive cache too)."""
    out = _prove("r40a_03_dp_abc_register_then_registry_clear_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
def test_r40a_fsdp_ac_recompute_differs_from_forward_is_not_accepted(tmp_path):
    """NOT EQUIVALENT at 05940a8 (4 refuted, 37 s); truth step 1 w1 0.0018, w2 0.013 (wrong:
    the recomputation sees a scale the step changed between the forward and the backward)."""
    out = _prove("r40a_15_fsdp_ac_recompute_differs_from_forward_wrong.py", tmp_path)
    assert _not_accepted(out), out
