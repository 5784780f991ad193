"""Stage processes: start, SIGKILL, replace, and never leave one behind.

Each process runs `python -m trainer.distributed.worker` with one end of a socket pair as its
control channel (no listening port). Guarantees, so that a run or a test that fails half-way
leaves no orphan:

- a worker asks the kernel to SIGKILL it when its parent dies (`PR_SET_PDEATHSIG`) and exits when
  its control channel closes;
- every worker runs in its own session (`start_new_session`), so a Ctrl-C in the terminal reaches
  the driver only, which then stops the workers itself;
- `Launcher.close()` (also registered with `atexit`) SIGKILLs every worker still alive and reaps
  it; `Launcher` is a context manager.

A failure is `kill(handle)`: `os.kill(pid, SIGKILL)`, then `waitpid`. Nothing of the process
survives; its memory, its gloo connections and the copies it held are gone.
"""

from __future__ import annotations

import atexit
import os
import signal
import socket
import subprocess
import sys
import time
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from trainer.distributed.control import WorkerLost, recv_message, send_message
from trainer.errors import TrainerError

__all__ = ["DistributedError", "WorkerHandle", "Launcher", "wait_any"]


class DistributedError(TrainerError):
    """A real multi-process run could not go on (a worker reported an error, or a timeout)."""


class WorkerHandle:
    """One stage process: its Popen, control connection and log file."""

    def __init__(self, proc: subprocess.Popen, conn: Connection, worker_id: int, log_path: Path):
        self.proc, self.conn, self.worker_id, self.log_path = proc, conn, worker_id, log_path
        self.started_s = time.perf_counter()
        self.ready = False

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def send(self, message: dict[str, Any]) -> None:
        send_message(self.conn, message)

    def recv(self, timeout_s: float) -> dict[str, Any]:
        """The next message; raises WorkerLost (process gone) or DistributedError (timeout, error reply)."""
        if not self.conn.poll(timeout_s):
            if not self.alive():
                raise WorkerLost(f"worker {self.worker_id} (pid {self.pid}) exited")
            raise DistributedError(f"worker {self.worker_id} (pid {self.pid}) did not answer within {timeout_s:.0f} s"
                                   f"; its log: {self.log_path}")
        message = recv_message(self.conn)
        if "error" in message:
            raise DistributedError(f"worker {self.worker_id} (pid {self.pid}): {message['error']}; "
                                   f"its log: {self.log_path}")
        return message

    def wait_ready(self, timeout_s: float) -> None:
        """Wait for the worker's hello (torch imported, control channel up)."""
        if not self.ready:
            self.recv(timeout_s)
            self.ready = True


class Launcher:
    """Starts and kills stage processes for one run directory (module docstring)."""

    def __init__(self, workdir: Path, store: Path):
        self.workdir, self.store = Path(workdir), Path(store)
        (self.workdir / "logs").mkdir(parents=True, exist_ok=True)
        self._handles: list[WorkerHandle] = []
        self._next_id = 0
        atexit.register(self.close)

    def spawn(self) -> WorkerHandle:
        """Start a worker process (returns at once; `WorkerHandle.wait_ready` waits for its hello)."""
        ours, theirs = socket.socketpair()
        log_path = self.workdir / "logs" / f"worker{self._next_id}.log"
        env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "trainer.distributed.worker", "--control-fd", str(theirs.fileno()),
                 "--parent-pid", str(os.getpid()), "--store", str(self.store)],
                pass_fds=(theirs.fileno(),), start_new_session=True, stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT, env=env)
        theirs.close()
        handle = WorkerHandle(proc, Connection(ours.detach()), self._next_id, log_path)
        self._next_id += 1
        self._handles.append(handle)
        return handle

    def kill(self, handle: WorkerHandle) -> None:
        """SIGKILL the process and reap it."""
        if handle.alive():
            try:
                os.kill(handle.pid, signal.SIGKILL)
            except ProcessLookupError:  # pragma: no cover - exited in between
                pass
        handle.proc.wait()
        handle.conn.close()

    def pids(self) -> list[int]:
        """Pids of every process this launcher started that is still alive."""
        return [h.pid for h in self._handles if h.alive()]

    def close(self) -> None:
        """Ask every live worker to exit, SIGKILL those still alive after a moment, reap all."""
        for h in self._handles:
            if h.alive():
                try:
                    h.send({"cmd": "exit"})
                except WorkerLost:
                    pass
        deadline = time.monotonic() + 2.0
        for h in self._handles:
            try:
                h.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            self.kill(h)
        atexit.unregister(self.close)

    def __enter__(self) -> Launcher:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def wait_any(handles: list[WorkerHandle], timeout_s: float) -> list[WorkerHandle]:
    """Handles whose connection has a message or is closed, waiting up to `timeout_s`."""
    by_conn = {h.conn: h for h in handles}
    return [by_conn[c] for c in wait(list(by_conn), timeout_s)]
