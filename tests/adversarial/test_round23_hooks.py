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


@pytest.mark.slow
def test_a_hook_kept_through_freezing_is_refused():
    r = subprocess.run([sys.executable, "-c", "import sys; from proofs.cli import prove_main; "
                        "sys.exit(prove_main(sys.argv[1:]))", "--torch", str(PLAN), "--jobs", "1",
                        "--no-check"], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert r.returncode == 3, (r.stdout[-2000:], r.stderr[-2000:])
    assert "parameter 'w1.weight' has a hook on its gradient accumulator" in r.stderr
