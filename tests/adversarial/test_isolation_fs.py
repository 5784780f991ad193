"""Adversarial round (issue 10 item 8): isolation through the file system.

Finding 1: the tracing child runs the plan with the user's write access to the installation, so
a plan can drop a package directory that shadows a module the parent imports after the trace.
Run on a throw-away copy of the repository (the plan writes only where ``ADV_SANDBOX`` exists).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PLANS = Path(__file__).resolve().parent / "plans"


def _sandbox(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    root.mkdir()
    for pkg in ("proofs", "spec_lang", "rewriting"):
        shutil.copytree(ROOT / pkg, root / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    (root / "docs").mkdir()
    shutil.copy(ROOT / "docs" / "certificate.schema.json", root / "docs")
    (root / "ADV_SANDBOX").write_text("the adversarial plans may write here\n")
    return root


def test_plan_cannot_shadow_a_module_of_the_verdict_process(tmp_path):
    root = _sandbox(tmp_path)
    plan = tmp_path / "plan.py"
    shutil.copy(PLANS / "iso_shadow_prover.py", plan)
    boot = ("import sys; sys.path.insert(0, sys.argv[1]); from proofs.cli import prove_main; "
            "sys.exit(prove_main(sys.argv[2:]))")
    r = subprocess.run([sys.executable, "-I", "-c", boot, str(root), str(plan), "--no-check"],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path)
    # the plan is wrong (no dp all-reduce): prove must say NOT EQUIVALENT (exit 1), and nothing
    # the plan wrote may run in prove's own process
    assert "written by the plan file" not in r.stdout
    # proofs/code_guard.py: the installation changed while the plan ran -> a refusal (exit 3,
    # bad input), never a verdict
    assert r.returncode == 3, r.stdout + r.stderr
    assert "while the plan file ran in its tracing process" in r.stderr, r.stderr
