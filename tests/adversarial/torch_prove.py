"""``prove --torch`` on an adversarial train file, in a subprocess (shared by the torch rounds'
regression tests: ``test_torch_round3.py``, ``_round4``, ``_round6``, ``_round7``).

The verdict is read from ``--json`` on stdout; bad input (exit 3) prints one line on stderr and
no JSON, returned as ``{"_rc": 3, "_err": stderr}``. ``--no-check`` skips the certificate's
self-check (the certificate is still written to ``tmp_path / "c.json"``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def prove(path: Path, tmp_path: Path) -> dict:
    """The ``--json`` verdict of ``prove --torch path`` with ``"_rc"``: its exit code.

    Raises:
        AssertionError: no JSON on stdout and an exit code other than 3 (a crash).
        subprocess.TimeoutExpired: after 1500 s.
    """
    r = subprocess.run([sys.executable, "-c", "import sys; from proofs.cli import prove_main; "
                        "sys.exit(prove_main(sys.argv[1:]))", "--torch", str(path),
                        "--json", "--jobs", "1", "--no-check",
                        "--certificate", str(tmp_path / "c.json")],
                       cwd=ROOT, capture_output=True, text=True, timeout=1500)
    if not r.stdout.strip():         # bad input (exit 3): one line on stderr, no JSON
        assert r.returncode == 3, r.stderr[-2000:]
        return {"_rc": 3, "_err": r.stderr}
    out = json.loads(r.stdout)
    out["_rc"] = r.returncode
    return out


# the test process's own machinery, which changes its modules' globals between two
# fingerprints: hypothesis times every garbage collection in a global of its ``junkdrawer``
# (a gc callback), and ``step_state`` collects garbage first (R10-5)
HARNESS = tuple(f"the module {m}" for m in ("hypothesis", "_pytest", "pytest", "xdist",
                                            "execnet", "pluggy"))


# process-wide entries other tests of the same worker move in the background (their threads
# ending, their garbage's finalizers): a prove tracing process runs nothing else
BACKGROUND = ("the Python threads running", "finalizers pending")


def without_harness(changes: dict[str, str], process: bool = False) -> dict[str, str]:
    """``state_changes`` without the test harness's modules (``HARNESS``) and, unless
    ``process``, without the process-wide entries of ``BACKGROUND``."""
    drop = HARNESS if process else HARNESS + BACKGROUND
    return {k: v for k, v in changes.items() if not k.startswith(drop)}
