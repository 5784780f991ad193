"""Where a functional collective's result may be read: only once ``wait_tensor`` waited it.

``torch.ops._c10d_functional.all_reduce`` (and ``all_gather_into_tensor``,
``reduce_scatter_tensor``, ``all_to_all_single``, the ``_coalesced`` forms, every op of the
``_c10d_functional`` namespace but ``wait_tensor``) is *asynchronous*: it returns a buffer the
backend fills in the background, and the value is there only after
``_c10d_functional.wait_tensor`` on that buffer (or a view of it: the work is found by its
storage). The lowering gives the collective's node its final value and ``wait_tensor`` the
identity, so a read of the buffer between the two (or with no wait at all) would be proved as the
reduced value while the real program reads whatever the backend had written by then
(adversarial round 28, R28-1). DTensor and ``funcol``'s ``AsyncCollectiveTensor`` wait before
any use (at once, under tracing), so the shipped programs never read early.

:class:`PendingCollectives` follows the graph in program order (pass 2 of the lowering) and says
which node reads a buffer whose collective was not waited yet: that node's value (and what it
writes) is UNKNOWN, naming the line. Views of the buffer (``view``, ``split``, ``detach``...)
read nothing and stay views of it. A collective that does not clone its input
(``all_gather_into_tensor``, ``reduce_scatter_tensor``, ``all_to_all_single``) reads that input
in the background too: a write into the input before the wait makes the collective's result
UNKNOWN.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping
from typing import Any

import torch.fx as fx

__all__ = ["WAIT", "NEVER_WAITED", "is_async_collective", "PendingCollectives"]

WAIT = "_c10d_functional.wait_tensor.default"
NEVER_WAITED = ("the result of an asynchronous functional collective that is never waited "
                "(_c10d_functional.wait_tensor): call wait_tensor on it before any use")
_NAMESPACES = ("_c10d_functional.", "_c10d_functional_autograd.")
# collectives whose output is a fresh clone of the input (the input may be written at once)
_CLONES_INPUT = frozenset({"_c10d_functional.all_reduce.default",
                           "_c10d_functional.all_reduce_coalesced.default"})


def is_async_collective(n: fx.Node) -> bool:
    """Whether ``n`` issues an asynchronous functional collective (every op of the functional
    namespaces but ``wait_tensor``)."""
    name = str(n.target)
    return n.op == "call_function" and name.startswith(_NAMESPACES) and name != WAIT


def _nodes(x: Any) -> list[fx.Node]:
    out: list[fx.Node] = []
    fx.node.map_arg(x, out.append)
    return out


class PendingCollectives:
    """The asynchronous collectives issued and not yet waited, in program order.

    ``roots``: node -> (the node owning its storage, whether it sees all of it), as the lowering
    computes it; ``views``: the nodes that only alias their argument (read nothing).
    """

    def __init__(self, roots: Mapping[fx.Node, tuple[fx.Node, bool]],
                 views: Iterable[fx.Node]) -> None:
        self.roots = roots
        self.views = frozenset(views)
        self.pending: dict[fx.Node, fx.Node] = {}    # storage root of a buffer -> collective
        self.inputs: dict[fx.Node, fx.Node] = {}     # storage root of an input it reads later
        self.lists: set[fx.Node] = set()             # collectives returning a list of buffers

    def _root(self, x: fx.Node) -> fx.Node:
        return self.roots.get(x, (x, True))[0]

    def early_read(self, n: fx.Node) -> fx.Node | None:
        """The collective whose un-waited buffer ``n`` reads or writes (None: none). A
        ``wait_tensor``, a view and a ``getitem`` read nothing."""
        if n.op != "call_function" or str(n.target) == WAIT or n in self.views \
                or n.target is operator.getitem or not self.pending:
            return None
        for a in _nodes((n.args, n.kwargs)):
            c = self.pending.get(self._root(a))
            if c is not None:
                return c
        return None

    def early_input_write(self, written: Iterable[fx.Node]) -> fx.Node | None:
        """The collective (not waited yet) that still reads one of the tensors ``written``."""
        for t in written:
            c = self.inputs.get(self._root(t))
            if c is not None:
                return c
        return None

    def after(self, n: fx.Node) -> None:
        """Record ``n`` once lowered: a collective's buffer is pending until a ``wait_tensor``
        of it (or of a view of it); a collective of a list (``_coalesced``) has one buffer per
        item, each waited on its own."""
        if n.op != "call_function":
            return
        if str(n.target) == WAIT:
            for a in _nodes(n.args[:1]):
                c = self.pending.pop(self._root(a), None)
                if c is not None and c not in self.pending.values():
                    self.inputs = {k: v for k, v in self.inputs.items() if v is not c}
            return
        if n.target is operator.getitem and isinstance(n.args[0], fx.Node) \
                and n.args[0] in self.lists:
            self.pending[self._root(n)] = n.args[0]
            return
        if is_async_collective(n):
            if isinstance(n.meta.get("val"), (list, tuple)):
                self.lists.add(n)          # its items are pending once taken (getitem)
            else:
                self.pending[self._root(n)] = n
            if str(n.target) not in _CLONES_INPUT:
                for a in _nodes(n.args):
                    self.inputs[self._root(a)] = n

    def never_waited(self) -> list[fx.Node]:
        """The storage roots of the buffers still pending (at the graph's output: never
        waited)."""
        return list(self.pending)
