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
@pytest.mark.xfail(strict=True, reason="R38e-1: a generator expression's body is a code object "
                   "caught does not guard; ExitStack.callback(next, gen) + suppress swallows")
def test_r38e_1_exitstack_genexpr_callback_is_not_accepted(tmp_path):
    """EQUIVALENT at 195d560 (4 goals, 23 s); truth w1 0.0070, w2 0.0093."""
    out = _prove("r38e_01_dp_exitstack_genexpr_callback_lr_wrong.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R38e-1: a lambda holding a yield is skipped by "
                   "visit_Lambda; its generator's error swallowed by ExitStack + suppress")
def test_r38e_1_exitstack_yield_lambda_callback_is_not_accepted(tmp_path):
    """EQUIVALENT at 195d560 (4 goals, 20 s); truth w1 0.0070, w2 0.0093."""
    out = _prove("r38e_02_dp_exitstack_yield_lambda_callback_lr_wrong.py", tmp_path)
    assert _not_accepted(out), out
