"""The zygote: one process that imports torch once and forks every stage process from that state.

Starting a stage process from scratch costs an interpreter, `import torch` and torch's first-use
initialisation: 3-5 s of CPU here, 10-20 s of wall time on a loaded 2-core machine. The zygote pays
it once; a new stage process is then a `fork()` of a process that has never trained anything
(Android's zygote and Python's multiprocessing forkserver work the same way), so a replacement
node is ready in milliseconds and still holds no state of the process it replaces.

Protocol over a Unix socket pair (the driver keeps the other end): the driver sends a JSON line
`{"fork": worker_id}`; the zygote makes a new socket pair, forks, and sends back
`{"pid": ...}` with the child's end of the pair attached (SCM_RIGHTS). The child closes everything
of the zygote's and runs `trainer.distributed.worker.StageWorker` on its end. Children are reaped
by the kernel (SIGCHLD ignored); every child asks to be SIGKILLed when the zygote dies, and the
zygote when the driver dies (`PR_SET_PDEATHSIG`), so no process outlives the driver.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
from pathlib import Path

__all__ = ["main", "request_fork"]

_MAX_MESSAGE = 65536


def request_fork(sock: socket.socket, worker_id: int) -> tuple[int, int]:
    """Ask the zygote behind `sock` for a new stage process: (pid, fd of its control channel)."""
    sock.sendall(json.dumps({"fork": worker_id}).encode() + b"\n")
    data, fds, _flags, _addr = socket.recv_fds(sock, _MAX_MESSAGE, 1)
    if not data:
        raise OSError("the zygote closed its channel")
    reply = json.loads(data.decode())
    if "error" in reply or len(fds) != 1:
        raise OSError(f"the zygote could not fork: {reply.get('error', 'no descriptor')}")
    return int(reply["pid"]), fds[0]


def _serve(sock: socket.socket, store: Path) -> None:
    from multiprocessing.connection import Connection

    from trainer.distributed.control import send_message
    from trainer.distributed.worker import StageWorker, _die_with_parent

    buffer = b""
    while True:
        chunk = sock.recv(_MAX_MESSAGE)
        if not chunk:
            return  # the driver is gone
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            json.loads(line)  # {"fork": worker_id}: the id only names the log line
            ours, theirs = socket.socketpair()
            pid = os.fork()
            if pid == 0:  # the new stage process
                try:
                    sock.close()
                    ours.close()
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    _die_with_parent(os.getppid())
                    conn = Connection(theirs.detach())
                    send_message(conn, {"hello": os.getpid()})
                    StageWorker(conn, store).serve()
                finally:
                    os._exit(0)
            socket.send_fds(sock, [json.dumps({"pid": pid}).encode()], [ours.fileno()])  # the driver's end
            theirs.close()
            ours.close()


def main(argv: list[str] | None = None) -> int:
    """Entry point: `python -m trainer.distributed.zygote --control-fd N --parent-pid P --store PATH`."""
    parser = argparse.ArgumentParser(prog="trainer.distributed.zygote")
    parser.add_argument("--control-fd", type=int, required=True)
    parser.add_argument("--parent-pid", type=int, required=True)
    parser.add_argument("--store", required=True)
    args = parser.parse_args(argv)
    from trainer.distributed.worker import _die_with_parent, _warm_up

    _die_with_parent(args.parent_pid)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)
    _warm_up()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the stage processes
    sock = socket.socket(fileno=args.control_fd)
    sock.sendall(b'{"hello": %d}\n' % os.getpid())
    _serve(sock, Path(args.store))
    return 0


if __name__ == "__main__":  # pragma: no cover - run as a process
    sys.exit(main())
