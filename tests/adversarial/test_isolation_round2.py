"""Adversarial round 2: ways for a plan file to reach ``prove``'s verdict process after the
``proofs/code_guard.py`` changes (directories by inode, forged ``__pycache__`` removed).

Every test runs ``prove`` on a throw-away copy of the repository holding ``ADV_SANDBOX`` (the
plans write only there, never into the real installation or the venv). Every plan is wrong (no
data-parallel all-reduce: loss and ``grad:w`` are 1/|dp| of the spec's), so the right outcome
is NOT EQUIVALENT (exit 1) or a refusal (exit 3), and nothing the plan wrote may run in the
verdict process.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from proofs.sandbox import landlock_abi
from tests.adversarial.test_isolation_fs import _sandbox

# proofs/sandbox.py: with Landlock the plan's child can write only beneath its trace directory,
# which closes findings R2-1..R2-5 and R2-9 as a class; without it (another OS, an old kernel)
# proofs/code_guard.py is the only protection and the findings it does not cover stay open
SANDBOXED = landlock_abi() >= 1

PLANS = Path(__file__).resolve().parent / "plans"
BOOT = ("import sys; sys.path.insert(0, sys.argv[1]); from proofs.cli import prove_main; "
        "sys.exit(prove_main(sys.argv[2:]))")


def _prove(tmp_path: Path, plan_name: str, *args: str, env: dict[str, str] | None = None):
    root = _sandbox(tmp_path)
    plan = tmp_path / "plan.py"
    shutil.copy(PLANS / plan_name, plan)
    r = subprocess.run([sys.executable, "-I", "-c", BOOT, str(root), str(plan), *args],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path,
                       env={**os.environ, **(env or {})})
    return root, r


@pytest.mark.xfail(not SANDBOXED, strict=True, reason="finding R2-1: a module first imported by prove after "
                   "the tracing child (rich, secrets, hmac, base64) is shadowed by a file the "
                   "plan wrote into the first sys.path directory; code_guard lists only names "
                   "imported before the child")
@pytest.mark.parametrize("name", ["rich", "secrets"])
def test_late_imported_module_cannot_be_shadowed(tmp_path, name):
    root, r = _prove(tmp_path, "iso_late_import_shadow.py", "--no-check",
                     env={"ADV_SHADOW": name})
    assert not (root / "SHADOW_RAN").exists(), r.stdout + r.stderr
    assert r.returncode in (1, 3), r.stdout + r.stderr


@pytest.mark.xfail(not SANDBOXED, strict=True, reason="finding R2-2: a process the plan detached (fork, setsid, "
                   "fork) outlives the child's process group, waits until the trace directory is "
                   "removed (code_guard.compare done), SIGSTOPs prove, rewrites the lazily "
                   "imported proofs/confirm.py and continues it; documented as uncovered in "
                   "proofs/code_guard.py")
def test_detached_process_cannot_write_after_the_comparison(tmp_path):
    root, r = _prove(tmp_path, "iso_detached_writer.py", "--no-check")
    # the plan did run its attack (in the sandbox it cannot even leave its marker)
    assert SANDBOXED or (root / "DETACHED_STARTED").exists()
    assert not (root / "SHADOW_RAN").exists(), r.stdout + r.stderr
    assert r.returncode in (1, 3), r.stdout + r.stderr


CHECK_BOOT = ("import sys; sys.path.insert(0, sys.argv[1]); from proofs.cli import check_main; "
              "sys.exit(check_main(sys.argv[2:]))")


@pytest.mark.slow   # writes and replays a 70 MB certificate (~11 s)
@pytest.mark.xfail(not SANDBOXED, strict=True, reason="finding R2-3: check-certificate re-traces the plan while "
                   "it replays steps and imports z3 lazily at the first smt step; the re-traced "
                   "plan writes z3.py into the first sys.path directory (not listed by "
                   "code_guard: z3 was not imported before the child), the shim answers unsat, "
                   "and a forged EQUIVALENT certificate of a wrong plan is accepted")
def test_retraced_plan_cannot_shadow_z3_in_the_checker(tmp_path):
    from tests.adversarial.forge import certificate, forge_smt, write

    root = _sandbox(tmp_path)
    plan = tmp_path / "plan.py"
    shutil.copy(PLANS / "iso_checker_z3_shadow.py", plan)
    cert = certificate(plan, tmp_path / "genuine.json")       # ADV_ATTACK unset: no write
    assert cert["verdict"] == "NOT EQUIVALENT"
    # the forger pads the certificate with valid refl steps, so that the checker reaches its
    # first smt step after the re-trace child has run the plan (~1 s of start-up)
    cert["steps"] += [{"kind": "refl", "lhs": 0, "rhs": 0}] * 2_000_000
    forged = write(tmp_path / "forged.json", forge_smt(cert))
    r = subprocess.run([sys.executable, "-I", "-c", CHECK_BOOT, str(root), str(forged),
                        "--plan", str(plan)], capture_output=True, text=True, timeout=600,
                       cwd=tmp_path, env={**os.environ, "ADV_ATTACK": "1"})
    assert not (root / "SHADOW_RAN").exists(), r.stdout + r.stderr
    assert r.returncode == 4, r.stdout + r.stderr   # rejected (docs/cli.md)


@pytest.mark.xfail(not SANDBOXED, strict=True, reason="finding R2-4: code_guard stamps files by (mtime_ns, size, "
                   "inode); the plan rewrites proofs/confirm.py in place at the same size, "
                   "restores its mtime_ns with os.utime and deletes its bytecode cache; "
                   "prove imports proofs.confirm after the child and runs the plan's code")
def test_same_stamp_rewrite_is_refused(tmp_path):
    root, r = _prove(tmp_path, "iso_same_stamp.py", "--no-check")
    assert not (root / "SHADOW_RAN").exists(), r.stdout + r.stderr
    assert r.returncode in (1, 3), r.stdout + r.stderr


@pytest.mark.xfail(not SANDBOXED, strict=True, reason="finding R2-5: a plan writes proofs/certificate.schema.json "
                   "(first of the checker's SCHEMA_PATHS; code_guard watches only .py files and "
                   "directories); every later check-certificate validates with the plan's schema "
                   "and accepts a certificate the published schema rejects")
def test_plan_cannot_replace_the_certificate_schema(tmp_path):
    import json

    root, r = _prove(tmp_path, "iso_schema_shadow.py", "--certificate",
                     str(tmp_path / "c.json"), "--no-check")
    if r.returncode == 3:            # refused: the installation changed while the plan ran
        return
    assert r.returncode == 0, r.stdout + r.stderr
    cert = json.loads((tmp_path / "c.json").read_text())
    cert["tools"] = None             # the published schema: "tools" is an object
    (tmp_path / "bad.json").write_text(json.dumps(cert))
    c = subprocess.run([sys.executable, "-I", "-c", CHECK_BOOT, str(root),
                        str(tmp_path / "bad.json"), "--plan", str(tmp_path / "plan.py")],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert c.returncode == 3, c.stdout + c.stderr


@pytest.mark.xfail(not SANDBOXED, strict=True, reason="finding R2-9: code_guard refuses the run during which "
                   "the plan wrote the installation (exit 3) but leaves what it wrote; the next "
                   "prove, of another plan that writes nothing, imports the plan's "
                   "proofs/prover/__init__.py (a package wins over prover.py) and exits 0")
def test_a_refused_plan_leaves_no_code_for_the_next_run(tmp_path):
    root = _sandbox(tmp_path)
    runs = []
    for name in ("iso_shadow_prover.py", "wrong_no_allreduce.py"):
        plan = tmp_path / name
        shutil.copy(PLANS / name, plan)
        runs.append(subprocess.run([sys.executable, "-I", "-c", BOOT, str(root), str(plan),
                                    "--no-check"], capture_output=True, text=True,
                                   timeout=600, cwd=tmp_path))
    first, second = runs
    assert first.returncode == 3, first.stdout + first.stderr     # refused, or its write failed
    assert second.returncode == 1, second.stdout + second.stderr  # the honest wrong plan
