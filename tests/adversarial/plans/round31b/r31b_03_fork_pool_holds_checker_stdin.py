"""Round 31b, R31b-1 (orphan): not a plan, a driver that does what ``prove`` does around its
self-check. ``prove`` starts the checker (proofs/isolation.py ``start_check``) with a pipe on its
stdin; later its z3 fallback (proofs/smt_fallback.py) opens a ``ProcessPoolExecutor`` with the
default start method, ``fork`` on Linux / Python < 3.14, whose workers inherit the pipe's write
end. If ``prove`` then dies (SIGKILL, the OOM killer), the checker never sees end of input: it
waits in ``select`` without a timeout (proofs/retrace.py ``EarlyRetrace.wait``) for as long as a
worker lives, and the orphaned workers of a fork pool never exit.

Usage: python r31b_03_fork_pool_holds_checker_stdin.py PLAN CERT SECONDS  (prints the checker's
pid and the pool's pids, then SIGKILLs itself)."""

import os
import signal
import sys
import time
from concurrent.futures import ProcessPoolExecutor

from proofs.isolation import start_check

plan, cert, secs = sys.argv[1], sys.argv[2], float(sys.argv[3])
early = start_check(cert, os.path.abspath(plan), name=plan, frontend="dsl", timeout_s=60)
print("checker", early.proc.pid, flush=True)
time.sleep(3)                       # its early re-trace ends; it blocks reading stdin
ex = ProcessPoolExecutor(2)         # as Z3Fallback.run with jobs > 1 (fork context)
ex.submit(time.sleep, secs)         # one z3 query of up to SMT_QUERY_S = 20 s
time.sleep(1)
print("pool", *ex._processes, flush=True)   # noqa: SLF001
os.kill(os.getpid(), signal.SIGKILL)
