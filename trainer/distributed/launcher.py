"""Stage processes: start, SIGKILL, replace, and never leave one behind.

Stage processes are forked by a *zygote* (trainer.distributed.zygote): one process, started with
`subprocess`, that imported torch once; each stage process is a fork of it that never held any
training state, so starting one takes milliseconds instead of an interpreter and `import torch`.
Every stage process talks to the driver over its own socket pair (no listening port).

Guarantees, so that a run or a test that fails half-way leaves no orphan:

- the zygote asks the kernel to SIGKILL it when the driver dies, and each stage process when the
  zygote dies (`PR_SET_PDEATHSIG`); both exit when their control channel closes;
- the zygote runs in its own session (`start_new_session`), so a Ctrl-C in the terminal reaches
  the driver only, which then stops everything itself;
- `Launcher.close()` (also registered with `atexit`) SIGKILLs every stage process still alive, then
  the zygote, and waits until they are gone; `Launcher` is a context manager.

A failure is `kill(handle)`: `os.kill(pid, SIGKILL)`, then wait until the process is gone (the
zygote's kernel-side reaping). Nothing of the process survives: its memory, its gloo connections,
the copies it held.
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

__all__ = ["DistributedError", "WorkerHandle", "Launcher", "wait_any", "process_alive"]

ZYGOTE_READY_TIMEOUT_S = 600.0  # importing torch on a loaded 2-core machine: 10-20 s measured


class DistributedError(TrainerError):
    """A real multi-process run could not go on (a worker reported an error, or a timeout)."""


def process_alive(pid: int, parent: int | None = None) -> bool:
    """True while `pid` exists and is not a zombie (and, if given, is a child of `parent`)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    state, ppid = fields[0], int(fields[1])
    return state != "Z" and (parent is None or ppid == parent)


class WorkerHandle:
    """One stage process: pid, control connection, the zygote that forked it."""

    def __init__(self, pid: int, conn: Connection, worker_id: int, zygote_pid: int, log_path: Path):
        self.pid, self.conn, self.worker_id = pid, conn, worker_id
        self.zygote_pid, self.log_path = zygote_pid, log_path
        self.ready = False
        self._unanswered: list[tuple[int, str]] = []  # (seq, cmd) of commands sent and not answered yet
        self._seq = 0

    def alive(self) -> bool:
        return process_alive(self.pid, self.zygote_pid)

    def send(self, message: dict[str, Any]) -> None:
        """Send a command; its reply must come back before any later command's (checked by `recv`)."""
        self._seq += 1
        self._unanswered.append((self._seq, str(message.get("cmd"))))
        send_message(self.conn, {**message, "seq": self._seq})

    def recv(self, timeout_s: float) -> dict[str, Any]:
        """The next message; raises WorkerLost (process gone) or DistributedError (timeout, error reply).

        A worker's ``hello`` that arrives while a command's reply is due (a worker started under
        load, nobody waited for it: stop 20's loaded run of tests/distributed took the hello for
        a ``burn`` reply) marks it ready and is skipped. The reply returned is the one to the
        newest command sent: replies to older commands are ones their caller gave up on (an
        exchange that raised when another stage died or timed out) and are skipped, so that they
        are never taken for a later command's reply (stop 21's loaded run took such a reply for
        a ``plan`` reply, then one for a ``burn`` reply).
        """
        deadline = time.monotonic() + timeout_s
        while True:
            left = max(0.0, deadline - time.monotonic())
            if not self.conn.poll(left):
                if not self.alive():
                    raise WorkerLost(f"worker {self.worker_id} (pid {self.pid}) exited")
                raise DistributedError(f"worker {self.worker_id} (pid {self.pid}) did not answer within "
                                       f"{timeout_s:.0f} s; logs: {self.log_path}")
            message = recv_message(self.conn)
            if "hello" in message:
                if self._unanswered:
                    self.ready = True
                    continue
                break
            due = [seq for seq, _ in self._unanswered]
            if message.get("seq") not in due:
                newest = self._unanswered[-1] if self._unanswered else (None, None)
                raise DistributedError(f"worker {self.worker_id} (pid {self.pid}) answered command "
                                       f"#{message.get('seq')} where #{newest[0]} ({newest[1]}) was due")
            # drop the command answered and every older one (their callers gave up on them)
            self._unanswered = [(s, c) for s, c in self._unanswered if s > message["seq"]]
            if self._unanswered:
                continue  # a reply to an abandoned command: the newest one's is still to come
            break
        if "error" in message:
            raise DistributedError(f"worker {self.worker_id} (pid {self.pid}): {message['error']}; "
                                   f"logs: {self.log_path}")
        return message

    def wait_ready(self, timeout_s: float) -> None:
        """Wait for the worker's hello."""
        if not self.ready:
            self.recv(timeout_s)
            self.ready = True


class Launcher:
    """Starts (through the zygote) and kills stage processes for one run directory (module docstring)."""

    def __init__(self, workdir: Path, store: Path):
        self.workdir, self.store = Path(workdir), Path(store)
        (self.workdir / "logs").mkdir(parents=True, exist_ok=True)
        self._handles: list[WorkerHandle] = []
        self._next_id = 0
        self._zygote: subprocess.Popen | None = None
        self._zsock: socket.socket | None = None
        atexit.register(self.close)

    def _start_zygote(self) -> None:
        ours, theirs = socket.socketpair()
        log_path = self.workdir / "logs" / "stages.log"
        env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        with open(log_path, "ab") as log:
            self._zygote = subprocess.Popen(
                [sys.executable, "-m", "trainer.distributed.zygote", "--control-fd", str(theirs.fileno()),
                 "--parent-pid", str(os.getpid()), "--store", str(self.store)],
                pass_fds=(theirs.fileno(),), start_new_session=True, stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT, env=env)
        theirs.close()
        ours.settimeout(ZYGOTE_READY_TIMEOUT_S)
        hello = b""
        try:
            while not hello.endswith(b"\n"):
                chunk = ours.recv(256)
                if not chunk:
                    raise DistributedError(f"the stage-process zygote exited at start; its log: {log_path}")
                hello += chunk
        except TimeoutError:
            raise DistributedError(f"the stage-process zygote did not start within {ZYGOTE_READY_TIMEOUT_S:.0f} s")
        ours.settimeout(60.0)
        self._zsock = ours

    def spawn(self) -> WorkerHandle:
        """A new stage process, forked from the zygote (returns once it exists; it says hello soon after)."""
        from trainer.distributed.zygote import request_fork

        if self._zygote is None:
            self._start_zygote()
        try:
            pid, fd = request_fork(self._zsock, self._next_id)
        except OSError as exc:
            raise DistributedError(f"cannot start a stage process: {exc}") from None
        handle = WorkerHandle(pid, Connection(fd), self._next_id, self._zygote.pid, self.workdir / "logs")
        self._next_id += 1
        self._handles.append(handle)
        return handle

    def kill(self, handle: WorkerHandle) -> None:
        """SIGKILL the stage process and wait until it is gone."""
        if handle.alive():
            try:
                os.kill(handle.pid, signal.SIGKILL)
            except ProcessLookupError:  # pragma: no cover - exited in between
                pass
        deadline = time.monotonic() + 30.0
        while handle.alive() and time.monotonic() < deadline:
            time.sleep(0.001)
        handle.conn.close()

    def pids(self) -> list[int]:
        """Pids of every process of this launcher that is still alive (stage processes and the zygote)."""
        out = [h.pid for h in self._handles if h.alive()]
        if self._zygote is not None and self._zygote.poll() is None:
            out.append(self._zygote.pid)
        return out

    def close(self) -> None:
        """SIGKILL every live stage process, then the zygote; wait until all are gone (idempotent)."""
        for h in self._handles:
            if h.alive() or not h.conn.closed:
                self.kill(h)
        if self._zygote is not None:
            if self._zygote.poll() is None:
                os.kill(self._zygote.pid, signal.SIGKILL)
            self._zygote.wait()
            self._zsock.close()
        atexit.unregister(self.close)

    def __enter__(self) -> Launcher:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def wait_any(handles: list[WorkerHandle], timeout_s: float) -> list[WorkerHandle]:
    """Handles whose connection has a message or is closed, waiting up to `timeout_s`."""
    by_conn = {h.conn: h for h in handles}
    return [by_conn[c] for c in wait(list(by_conn), timeout_s)]
