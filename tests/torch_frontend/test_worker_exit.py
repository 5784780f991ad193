"""The capture child ends with ``os._exit`` once its output is written (``worker.run``, stop 41):
main's exit code, stdout and stderr flushed, no teardown (exit handlers do not run)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[2])

_CHILD = """
import atexit, sys
sys.path.insert(0, sys.argv[1])
from spec_lang.torch_frontend import worker
def main(argv):
    print("main ran", argv, flush=False)
    sys.stderr.write("to stderr, unflushed")
    return int(argv[0])
worker.main = main
atexit.register(lambda: print("exit handler ran"))
worker.run(sys.argv[2:])
print("not reached")
"""


def test_run_ends_with_mains_code_without_teardown():
    for code in ("0", "3"):
        p = subprocess.run([sys.executable, "-I", "-c", _CHILD, ROOT, code],
                           capture_output=True, text=True, timeout=60, check=False)
        assert p.returncode == int(code)
        assert f"main ran ['{code}']" in p.stdout
        assert "to stderr, unflushed" in p.stderr
        assert "exit handler ran" not in p.stdout and "not reached" not in p.stdout


def test_the_capture_pool_starts_children_through_run():
    from spec_lang.torch_frontend.tracedata import _BOOT

    assert "worker import run; run(sys.argv[2:])" in _BOOT
