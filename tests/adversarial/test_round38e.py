"""Adversarial round 38e (``tests/adversarial/ATTEMPTS.md``, "Round 38e"), against main at
195d560 (``caught``: every ``lambda`` of the train file compiled as ``lambda a: <guard>(lambda:
body, line)``, R38d-1's fix, 844763d). Plans in ``plans/round38e/``. Truth:
``tests/adversarial/torch4_truth.py FILE 1`` (dp 2, gloo, float64).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND38E = Path(__file__).resolve().parent / "plans" / "round38e"


def _not_accepted(out: dict) -> bool:
    """Anything but EQUIVALENT (NOT EQUIVALENT, UNKNOWN or a refusal)."""
    return out["_rc"] != 0 and out.get("verdict") != "EQUIVALENT"


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND38E / name, tmp_path)


# -- findings (open): strict xfails ---------------------------------------------------------------


@pytest.mark.slow
def test_r38e_1_exitstack_genexpr_callback_is_not_accepted(tmp_path):
    """EQUIVALENT at 195d560 (4 goals, 23 s); truth w1 0.0070, w2 0.0093.
    Fixed in round 38 (``caught``, 8a5e610: a generator expression's element is guarded)."""
    out = _prove("r38e_01_dp_exitstack_genexpr_callback_lr_wrong.py", tmp_path)
    assert _not_accepted(out), out
    assert out["_rc"] == 3, out


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R38e-1: a lambda holding a yield is skipped by "
                   "visit_Lambda; its generator's error swallowed by ExitStack + suppress")
def test_r38e_1_exitstack_yield_lambda_callback_is_not_accepted(tmp_path):
    """EQUIVALENT at 195d560 (4 goals, 20 s); truth w1 0.0070, w2 0.0093."""
    out = _prove("r38e_02_dp_exitstack_yield_lambda_callback_lr_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r38e_2_lambda_locals_defaults_is_not_accepted(tmp_path):
    """EQUIVALENT at 195d560 (4 goals, 19 s); truth w1 0.0070, w2 0.0093.
    Fixed in round 38 (``caught``, 8a5e610: a lambda reading locals() is left as written)."""
    out = _prove("r38e_03_dp_lambda_locals_defaults_lr_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r38e_3_class_lambda_zero_arg_super_is_equivalent(tmp_path):
    """exit 3 at 195d560 (7 s, RuntimeError: super(): no arguments); truth 0 / 0 (right).
    Fixed in round 38 (``caught``, 8a5e610: a lambda using super() is left as written)."""
    out = _prove("r38e_04_dp_class_lambda_zero_arg_super_right.py", tmp_path)
    assert _equivalent(out), out


# -- sound outcomes: asserted ---------------------------------------------------------------------


@pytest.mark.slow
def test_r38e_realistic_lambdas_are_equivalent(tmp_path):
    """EQUIVALENT at 195d560 (4 goals, 20 s); truth 6e-17 / 0 (right)."""
    out = _prove("r38e_05_dp_realistic_lambdas_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
def test_r38e_lambdalr_is_unknown_by_f11_3_not_refused_by_caught(tmp_path):
    """UNKNOWN at 195d560 (18 s): step-state ``optimizer._opt_called`` (F11-3, kept by
    design), not a refusal of the guarded lambda; truth 0 / 3e-17 (right)."""
    out = _prove("r38e_06_dp_lambdalr_warmup_right.py", tmp_path)
    assert _not_accepted(out), out
    assert out["_rc"] == 2, out
    assert "_opt_called" in str(out.get("open")), out


@pytest.mark.slow
def test_r38e_threadpool_future_exception_lambda_is_refused(tmp_path):
    """exit 3 at 195d560 (8 s): a thread started in the capture (R34b-2); truth w1 0.0070."""
    out = _prove("r38e_08_dp_threadpool_future_exception_lambda_lr_wrong.py", tmp_path)
    assert _not_accepted(out), out
    assert out["_rc"] == 3, out


@pytest.mark.slow
def test_r38e_4_lambda_with_dead_nested_yield_lambda_is_not_accepted(tmp_path):
    """EQUIVALENT at 195d560 (4 goals, 20 s); truth w1 0.0070, w2 0.0093.
    Fixed in round 38 (``caught``, 8a5e610: the yield check looks at the lambda's own scope)."""
    out = _prove("r38e_07_dp_lambda_with_dead_nested_yield_lambda_lr_wrong.py", tmp_path)
    assert _not_accepted(out), out
    assert out["_rc"] == 3, out


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R38e-5: the fake-only raiser reached by C code only "
                   "(ExitStack -> list.extend -> map(bytes)): no frame of the file to guard")
def test_r38e_5_exitstack_builtin_map_no_frame_is_not_accepted(tmp_path):
    """EQUIVALENT at 195d560 (4 goals, 20 s); truth w1 0.0070, w2 0.0093."""
    out = _prove("r38e_09_dp_exitstack_builtin_map_no_frame_lr_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r38e_6_activation_checkpointing_check_fn_lambda_is_equivalent(tmp_path):
    """exit 3 at 195d560 (9 s); truth 6e-17 / 0 (right). Fixed in round 38 (8a5e610) but
    then an internal DimsError (the wrapper's ``_checkpoint_wrapped_module`` names, UNKNOWN);
    EQUIVALENT since ``wrapper_names`` (stop 39, 54 s)."""
    out = _prove("r38e_10_dp_activation_checkpointing_check_fn_lambda_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
def test_r38e_6_checkpoint_use_reentrant_false_is_equivalent(tmp_path):
    """exit 3 at 195d560 (8 s); truth 6e-17 / 0 (right).
    Fixed in round 38 (``caught``, 8a5e610: torch's _StopRecomputationError is let through)."""
    out = _prove("r38e_11_dp_checkpoint_use_reentrant_false_right.py", tmp_path)
    assert _equivalent(out), out
