"""Round 59 (the lead's own attempt, ``tests/adversarial/ATTEMPTS.md`` "Round 59"): state kept
in an audit hook's closure (``sys.addaudithook``: a C list Python can neither read nor empty).
The plan was EQUIVALENT (rc 0) at f3f312e; the truth (``torch4_truth.py FILE 2``) doubles the
parallel run's gradients from step 2. The capture child now watches for added audit hooks
before the train file runs (``c_registries.watch_audit_hooks``): adding one is refused with
a one-line error naming the line (exit 3), and recorded (the fingerprint is unreadable)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND = Path(__file__).resolve().parent / "plans" / "round59"


@pytest.mark.slow
def test_r59_1_audit_hook_counter_prove_not_equivalent():
    from proofs.cli import prove_main

    assert prove_main(["--torch", str(ROUND / "r59_01_audit_hook_wrong.py"), "--jobs", "1",
                       "--no-check"]) == 3
