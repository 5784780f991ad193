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
    # refused by proofs/code_guard.py, or (proofs/sandbox.py, Landlock) the write itself failed
    assert ("while the plan file ran in its tracing process" in r.stderr
            or "Permission denied" in r.stderr), r.stderr
    assert not (tmp_path / "root" / "proofs" / "prover").exists() or "while the plan" in r.stderr


def test_forged_bytecode_caches_never_run(tmp_path):
    """A plan that forges ``__pycache__`` entries for every module of ``proofs/``: the caches
    that appeared or changed are removed after its child (``proofs/code_guard.py``), so
    ``prove``'s self-check compiles from source and the verdict stays NOT EQUIVALENT."""
    root = _sandbox(tmp_path)
    plan = tmp_path / "plan.py"
    shutil.copy(PLANS / "iso_forged_pyc.py", plan)
    boot = ("import sys; sys.path.insert(0, sys.argv[1]); from proofs.cli import prove_main; "
            "sys.exit(prove_main(sys.argv[2:]))")
    r = subprocess.run([sys.executable, "-I", "-c", boot, str(root), str(plan)],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert not (root / "FORGED_RAN").exists(), (root / "FORGED_RAN").read_text()
    # NOT EQUIVALENT (caches removed by proofs/code_guard.py), or exit 3 when the sandbox
    # (proofs/sandbox.py) made the plan's first write fail
    assert (r.returncode, "NOT EQUIVALENT" in r.stdout) in ((1, True), (3, False)), \
        r.stdout + r.stderr


_GUARD = """
import os, sys, importlib.util
sys.path.insert(0, sys.argv[1])
from proofs import code_guard
root = sys.argv[1]
snap = code_guard.snapshot()
# another process's first import: a new __pycache__ in a package directory, and a valid cache
os.makedirs(os.path.join(root, 'spec_lang', 'models', '__pycache__'), exist_ok=True)
new_pyc = importlib.util.cache_from_source(os.path.join(root, 'spec_lang', 'models', 'x.py'))
open(new_pyc, 'wb').write(b'cache')
removed = code_guard.compare(snap)
assert removed == [new_pyc] and not os.path.exists(new_pyc), removed
# a new module in the installation is a refusal
open(os.path.join(root, 'proofs', 'prover_extra.py'), 'w').write('')
try:
    code_guard.compare(snap)
except code_guard.CodeChanged as e:
    print('refused:', e)
"""


def test_code_guard_ignores_new_pycache_dirs_and_removes_new_caches(tmp_path):
    """Stop 19's CI: a concurrent worker's first import created ``spec_lang/models/__pycache__``
    (the directory's mtime changed) and ``prove`` refused a correct plan. Directories are
    recorded by inode only; new caches are deleted, not refused; a new ``.py`` is refused."""
    root = _sandbox(tmp_path)
    r = subprocess.run([sys.executable, "-I", "-c", _GUARD, str(root)], capture_output=True,
                       text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "refused:" in r.stdout and "prover_extra.py appeared" in r.stdout, r.stdout


@pytest.mark.skipif(__import__("proofs.sandbox", fromlist=["x"]).landlock_abi() < 1,
                    reason="no Landlock on this kernel: proofs/code_guard.py is the only guard")
def test_the_plans_child_cannot_write_outside_its_trace_directory(tmp_path):
    """proofs/sandbox.py: the plan's first write outside the trace directory fails (exit 3,
    the user's line), and nothing is written; with SHARDPROOF_SANDBOX=off it succeeds."""
    import os

    target = tmp_path / "written.txt"
    plan = tmp_path / "plan.py"
    plan.write_text(f"open({str(target)!r}, 'w').write('x')\n"
                    + (PLANS / "iso_shadow_prover.py").read_text().split('"""', 2)[2]
                    .split("_root = ", 1)[0] + "\n")
    boot = ("import sys; sys.path.insert(0, sys.argv[1]); from proofs.cli import prove_main; "
            "sys.exit(prove_main(sys.argv[2:]))")
    r = subprocess.run([sys.executable, "-I", "-c", boot, str(ROOT), str(plan), "--no-check"],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert r.returncode == 3 and "plan.py:1: PermissionError" in r.stderr, r.stderr
    assert not target.exists()
    r = subprocess.run([sys.executable, "-I", "-c", boot, str(ROOT), str(plan), "--no-check"],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path,
                       env={**os.environ, "SHARDPROOF_SANDBOX": "off"})
    assert target.read_text() == "x"
