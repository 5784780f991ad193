"""A command's reply is never taken from an earlier, abandoned command (stop 21's loaded run).

When an exchange raises part-way (another stage died, the per-test alarm fired), the replies of
the stages not read yet stay in their pipes. `WorkerHandle.recv` must return the reply to the
newest command sent and skip those, or the next exchange reads a ``burn`` reply as a ``plan``
reply (the `KeyError: 'cpu_s'` / missing ``received`` failures of stop 21).
"""

from __future__ import annotations

import os
from multiprocessing import Pipe

import pytest

from trainer.distributed.control import recv_message, send_message
from trainer.distributed.launcher import DistributedError, WorkerHandle


def _handle():
    ours, theirs = Pipe()
    return WorkerHandle(os.getpid(), ours, worker_id=0, zygote_pid=os.getppid(), log_path="w.log"), theirs


def test_reply_to_an_abandoned_command_is_skipped():
    handle, worker = _handle()
    handle.send({"cmd": "burn"})          # #1: its caller gave up (an exchange that raised)
    handle.send({"cmd": "plan"})          # #2
    first, second = recv_message(worker), recv_message(worker)
    assert (first["seq"], second["seq"]) == (1, 2)
    send_message(worker, {"cpu_s": 0.5, "seq": 1})
    send_message(worker, {"received": [[0, 1, 8, 0.1]], "seq": 2})
    reply = handle.recv(5.0)
    assert reply == {"received": [[0, 1, 8, 0.1]], "seq": 2}
    send_message(worker, {"hello": True})   # nothing is due now: a hello is returned as is
    assert handle.recv(5.0) == {"hello": True}


def test_error_reply_of_an_abandoned_command_is_skipped_and_a_current_error_raises():
    handle, worker = _handle()
    handle.send({"cmd": "burn"})
    handle.send({"cmd": "plan"})
    send_message(worker, {"error": "RuntimeError: old", "seq": 1})
    send_message(worker, {"error": "RuntimeError: new", "seq": 2})
    with pytest.raises(DistributedError, match="RuntimeError: new"):
        handle.recv(5.0)


def test_a_reply_to_no_command_sent_is_an_error():
    handle, worker = _handle()
    handle.send({"cmd": "plan"})
    send_message(worker, {"received": [], "seq": 7})
    with pytest.raises(DistributedError, match="answered command #7 where #1 \\(plan\\) was due"):
        handle.recv(5.0)


def test_a_hello_while_a_reply_is_due_marks_ready_and_is_skipped():
    handle, worker = _handle()
    handle.send({"cmd": "burn"})
    send_message(worker, {"hello": True})
    send_message(worker, {"cpu_s": 0.25, "wall_s": 0.5, "seq": 1})
    assert handle.recv(5.0)["cpu_s"] == 0.25
    assert handle.ready
