"""SIGTERM to the ``prove`` console script (``timeout``, a job scheduler) ends its tracing
child's process group too, and ``prove`` exits 143 (stop 53: a new user's ``timeout prove
--torch ...`` left the tracing child and its capture workers running)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _holding(needle: str) -> list[int]:
    """Pids of processes whose command line mentions ``needle``."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                cmd = Path(f"/proc/{d}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if needle in cmd:
                out.append(int(d))
    return out


def _wait_for(cond, bound: float) -> bool:
    end = time.monotonic() + bound
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.1)
    return cond()


def test_sigterm_ends_prove_and_its_tracing_child(tmp_path):
    plan = tmp_path / "plan_that_sleeps.py"
    plan.write_text("import time\ntime.sleep(300)\n")
    prove = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.argv = ['prove', sys.argv[1], '--no-check']; "
         "from proofs.cli import prove_main; prove_main()", str(plan)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    child = "child_main"
    try:
        # the tracing child (its own session) is up and importing the plan
        assert _wait_for(lambda: any(p != prove.pid for p in _holding(str(plan))
                                     if child in Path(f"/proc/{p}/cmdline").read_text()), 60)
        prove.send_signal(signal.SIGTERM)
        assert prove.wait(timeout=60) == 143
        assert _wait_for(lambda: not _holding(str(plan)), 30), _holding(str(plan))
    finally:
        for p in _holding(str(plan)):
            try:
                os.killpg(p, signal.SIGKILL)
            except OSError:
                pass
        if prove.poll() is None:
            os.killpg(prove.pid, signal.SIGKILL)
        prove.communicate(timeout=30)
