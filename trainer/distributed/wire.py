"""Point-to-point messages between stage processes: gloo process groups and framed tensors.

One gloo process group per *generation*: the stages alive between two failures. After a failure
the survivors and the replacement processes form a new group (ranks = stage indices) under a fresh
store prefix; the old group is abandoned with whatever it still had in flight. The rendezvous store
is a `FileStore` in the run's directory and gloo's device is bound to 127.0.0.1, so a run opens no
port beyond localhost.

Why a status word on every message (measured with torch 2.13 gloo, docs/decisions.md): a gloo
receive that waits on a *killed* peer fails at once ("Connection closed by peer"), but one that waits
on a live peer that is itself stuck cannot be interrupted: `ProcessGroupGloo.abort()` and
`shutdown()` leave it blocked, `Work.wait(timeout)` closes the pair for good, and `is_completed()`
stays False until `wait()` is called. So an aborted iteration unblocks its waiters itself: every
tensor travels as `n + 3` float32 values: the data, a status (`OK` or `ABORT`) and the send time
(the system-wide monotonic clock, float64 bits in two words: the receiver measures how long a
message took to reach a waiting process, wake-up included); a stage that stops early sends `ABORT`
frames for every message it still owed (trainer.distributed.worker).
"""

from __future__ import annotations

import datetime
import time
from pathlib import Path

import torch
from torch.distributed import FileStore, PrefixStore, ProcessGroupGloo

__all__ = ["OK", "ABORT", "PeerLost", "PeerAborted", "connect_group", "Wire"]

OK, ABORT = 0.0, 1.0
_TAIL = 3  # status + send time (two words)


class PeerLost(RuntimeError):
    """A message could not be exchanged: the peer's process is gone (or its group failed)."""


class PeerAborted(RuntimeError):
    """The peer stopped its iteration early and sent an ABORT frame in place of the tensor."""


def connect_group(store_path: Path, generation: int, rank: int, world: int, timeout_s: float) -> ProcessGroupGloo:
    """Join generation `generation`'s gloo group as `rank` of `world` (blocks until all have joined).

    Every operation of the group fails after `timeout_s` seconds, the hard bound of every wait.
    """
    store = PrefixStore(f"gen{generation}/", FileStore(str(store_path), -1))
    opts = ProcessGroupGloo._Options()
    opts._timeout = datetime.timedelta(seconds=timeout_s)
    opts._devices = [ProcessGroupGloo.create_device(hostname="127.0.0.1")]
    return ProcessGroupGloo(store, rank, world, opts)


class Wire:
    """Framed sends and receives of float32 tensors over one group (tags keep messages apart).

    `isend` returns at once; the frame must stay alive until the send completes, so the Wire keeps
    every pending send until `wait_sends` (after a successful iteration) or `forget_sends` (after
    an aborted one, when the group is abandoned anyway).
    """

    def __init__(self, group: ProcessGroupGloo, rank: int):
        self.group, self.rank = group, rank
        self.last_delay_s: float | None = None
        self._pending: list[tuple[object, torch.Tensor]] = []
        self._abandoned: list[tuple[object, torch.Tensor]] = []  # kept alive: gloo may still read them

    def isend(self, tensor: torch.Tensor, dst: int, tag: int, status: float = OK) -> None:
        """Send `tensor` (any shape, float32) to `dst`, framed with `status`; raises PeerLost."""
        flat = tensor.detach().reshape(-1).to(torch.float32)
        frame = torch.empty(flat.numel() + _TAIL, dtype=torch.float32)
        frame[:-_TAIL].copy_(flat)
        frame[-_TAIL] = status
        frame[-2:] = torch.tensor([time.perf_counter()], dtype=torch.float64).view(torch.float32)
        try:
            work = self.group.send([frame], dst, tag)
        except RuntimeError as exc:
            raise PeerLost(f"send to stage {dst} failed: {str(exc).splitlines()[0]}") from None
        self._pending.append((work, frame))

    def send_abort(self, numel: int, dst: int, tag: int) -> None:
        """Send an ABORT frame of the size `dst` expects; a lost peer is ignored."""
        try:
            self.isend(torch.zeros(numel), dst, tag, status=ABORT)
        except PeerLost:
            pass

    def recv(self, numel: int, src: int, tag: int) -> torch.Tensor:
        """Receive `numel` float32 values from `src` (flat); raises PeerLost or PeerAborted.

        Sets `last_delay_s`: seconds from the send to this process having the message when it was
        already waiting for it (the link's latency as the run lived it, wake-up included), else None.
        """
        frame = torch.empty(numel + _TAIL, dtype=torch.float32)
        t_call = time.perf_counter()
        try:
            self.group.recv([frame], src, tag).wait()
        except RuntimeError as exc:
            raise PeerLost(f"receive from stage {src} failed: {str(exc).splitlines()[0]}") from None
        t_got = time.perf_counter()
        if frame[-_TAIL].item() != OK:
            raise PeerAborted(f"stage {src} aborted the iteration")
        t_sent = float(frame[-2:].clone().view(torch.float64).item())
        self.last_delay_s = t_got - t_sent if t_call <= t_sent else None
        return frame[:-_TAIL]

    def wait_sends(self) -> None:
        """Wait until every pending send completed; raises PeerLost."""
        pending, self._pending = self._pending, []
        for work, _ in pending:
            try:
                work.wait()
            except RuntimeError as exc:
                raise PeerLost(f"send failed: {str(exc).splitlines()[0]}") from None

    def forget_sends(self) -> None:
        """Stop waiting for the pending sends (the group is about to be abandoned).

        The frames and works stay referenced: a send to a peer that never receives it stays
        pending inside gloo, which must not see its buffer freed.
        """
        self._abandoned += self._pending
        self._pending = []
