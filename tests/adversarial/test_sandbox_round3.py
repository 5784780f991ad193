"""Adversarial round 3: the write sandbox (``proofs/sandbox.py``) and the files of the trace
directory that ``prove`` reads after its tracing child (``tests/adversarial/ATTEMPTS.md``,
"Round 3").

Finding R3-1: the sandbox lets the plan write anything beneath its own trace directory, and
``proofs/isolation.py`` ``PendingTrace.result`` -> ``_tail`` opens ``<trace dir>/stderr`` with a
plain ``open`` and trusts ``seek(0, 2)``: a plan that replaces it with a directory makes ``prove``
die with a traceback and exit 1 (NOT EQUIVALENT's code) on a *correct* plan; a symlink to
``/dev/zero`` makes the read unbounded (``seek`` answers 0: ``prove`` was OOM-killed, exit -9);
a FIFO blocks ``open`` for ever, past ``--trace-timeout``. The plan is correct, so the right
outcome is EQUIVALENT (exit 0) or a one-line refusal (exit 3).

The plan writes only beneath its own trace directory, so these run on the real installation.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

PLANS = Path(__file__).resolve().parent / "plans"
ROOT = Path(__file__).resolve().parents[2]
BOOT = ("import sys; sys.path.insert(0, sys.argv[1]); from proofs.cli import prove_main; "
        "sys.exit(prove_main(sys.argv[2:]))")


def _prove(tamper: str, timeout: float = 300) -> subprocess.CompletedProcess:
    def cap() -> None:   # the /dev/zero variant must fail fast, not eat the machine's memory
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))

    return subprocess.run([sys.executable, "-I", "-c", BOOT, str(ROOT),
                           str(PLANS / "r3_trace_dir_tamper.py"), "--no-check"],
                          capture_output=True, text=True, timeout=timeout, preexec_fn=cap,
                          env={**os.environ, "ADV_TAMPER": tamper})


def test_untampered_control_is_equivalent():
    r = _prove("")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("EQUIVALENT"), r.stdout


# fixed (was a strict xfail): finding R3-1, proofs/isolation.py reads only regular files of the trace directory, bounded
@pytest.mark.parametrize("tamper", ["dir", "gone"])
def test_trace_dir_stderr_replaced_gives_a_clean_answer(tamper):
    r = _prove(tamper)
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.returncode in (0, 3), r.stdout + r.stderr[-2000:]


# fixed (was a strict xfail): finding R3-1, proofs/isolation.py reads only regular files of the trace directory, bounded
def test_trace_dir_stderr_devzero_is_bounded():
    r = _prove("devzero")
    assert "Traceback" not in r.stderr and "MemoryError" not in r.stderr, r.stderr[-2000:]
    assert r.returncode in (0, 3), r.stdout + r.stderr[-2000:]
