"""Adversarial round 23's finding on the non-pipelined path (``tests/adversarial/ATTEMPTS.md``
"Round 23"; the pipelining findings stay with the unshipped ``wip/adv23`` branch).

R23-1: a hook on a parameter's gradient accumulator registered in ``parallelize``, the
parameter then frozen and unfrozen by ``train_step``, was EQUIVALENT (``accumulator_hooks``
counted 0 on a frozen parameter; for real the node keeps its hook: parameters 0.0070 / 0.0093
off after one step by gloo truth). Now refused, exit 3.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PLAN = ROOT / "tests" / "adversarial" / "plans" / "round23" / \
    "r23_01_accum_hook_frozen_then_unfrozen.py"


R25 = ROOT / "tests" / "adversarial" / "plans" / "round25"


def _prove(plan: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "import sys; from proofs.cli import prove_main; "
                           "sys.exit(prove_main(sys.argv[1:]))", "--torch", str(plan), "--jobs",
                           "1", "--no-check"], cwd=ROOT, capture_output=True, text=True,
                          timeout=900)


@pytest.mark.slow
def test_a_hook_kept_through_freezing_is_refused():
    r = _prove(PLAN)
    assert r.returncode == 3, (r.stdout[-2000:], r.stderr[-2000:])
    assert "parameter 'w1.weight' has a hook on its gradient accumulator" in r.stderr


@pytest.mark.slow
def test_a_parameter_frozen_by_parallelize_only_is_not_equivalent():
    """Review of R23-1's fix (stop 28): ``parallelize`` freezing ``w1.weight`` was EQUIVALENT
    (every traced parameter was built trainable); gloo truth: w1 0.00703 off after a step."""
    r = _prove(R25 / "a2_freeze_in_parallelize.py")
    assert r.returncode == 3, (r.stdout[-2000:], r.stderr[-2000:])
    assert "leaves no gradient on ['w1.weight']" in r.stderr


@pytest.mark.slow
def test_a_frozen_inference_mode_table_still_proves():
    """The count of a frozen parameter's hooks crashed on an inference tensor (a right file)."""
    r = _prove(R25 / "a1_inference_frozen_param.py")
    assert r.returncode == 0 and "EQUIVALENT" in r.stdout, (r.stdout[-2000:], r.stderr[-2000:])
