"""The control channel between the driver and a stage process: JSON messages over a socket pair.

Each worker is started with one end of a `socket.socketpair()` (an inherited file descriptor, no
listening port) wrapped as a `multiprocessing.connection.Connection`; messages are JSON objects
sent with `send_bytes` (never pickle). A worker that dies closes its end, so the driver's next read
raises `WorkerLost` at once; a driver that dies closes the other end and the worker exits.

Commands (driver -> worker, key "cmd") and their replies are documented in
trainer/distributed/worker.py; tensors never travel here, only over gloo (trainer.distributed.wire).
"""

from __future__ import annotations

import json
import math
from multiprocessing.connection import Connection
from typing import Any

__all__ = ["WorkerLost", "send_message", "recv_message"]


class WorkerLost(RuntimeError):
    """The other end of a control channel is gone (its process died)."""


def _encode(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return {"__float__": repr(value)}  # JSON has no inf/nan; losses can be nan after a bad rebuild
    if isinstance(value, dict):
        return {str(k): _encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"__float__"}:
            return float(value["__float__"])
        return {k: _decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


def send_message(conn: Connection, message: dict[str, Any]) -> None:
    """Send one JSON object; raises WorkerLost when the other end is closed."""
    data = json.dumps(_encode(message), allow_nan=False).encode()
    try:
        conn.send_bytes(data)
    except (BrokenPipeError, ConnectionResetError, EOFError, OSError) as exc:
        raise WorkerLost(f"control channel closed ({type(exc).__name__})") from None


def recv_message(conn: Connection) -> dict[str, Any]:
    """Receive one JSON object (blocks); raises WorkerLost on end of file."""
    try:
        data = conn.recv_bytes()
    except (EOFError, ConnectionResetError, OSError) as exc:
        raise WorkerLost(f"control channel closed ({type(exc).__name__})") from None
    return _decode(json.loads(data))
