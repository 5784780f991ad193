"""``dist.all_reduce`` marks the all-reduce it issues only when called plainly
(``all_reduce_mark.py``; adversarial round 29, R29-1): a duck-typed ``group=`` forwarding to
the real process group (``dist.all_reduce`` then waits no work) or a ``TorchFunctionMode`` of the
train file issuing its own all-reduce leave the node unmarked, so the capture refuses it."""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.fx.experimental.proxy_tensor import make_fx
from torch.overrides import TorchFunctionMode

from spec_lang.torch_frontend.all_reduce_mark import (ISSUED_BY, marking_all_reduce,
                                                       unmarked_all_reduces)
from spec_lang.torch_frontend.world import fake_world


class _DuckGroup:
    """Forwards to the real group and returns no work (R29-1, ``r29_01``)."""

    def __init__(self, pg):
        self.pg = pg

    def allreduce(self, tensors, opts):
        self.pg.allreduce(tensors, opts)
        return None

    def __getattr__(self, k):
        return getattr(self.pg, k)


class _TakeOver(TorchFunctionMode):
    """Issues ``pg.allreduce`` in place of ``dist.all_reduce``, never waited (``r29_02``)."""

    def __init__(self, pg):
        super().__init__()
        self.pg = pg

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") == "all_reduce":   # as the real run names it
            opts = dist.AllreduceOptions()
            opts.asyncOp = False
            self.pg.allreduce([args[0]], opts)
            return None
        return func(*args, **(kwargs or {}))


def _marks(call) -> list[bool]:
    """The mark of every ``c10d.allreduce_`` node ``call(all_reduce, x, group)`` records."""
    with fake_world({"dp": 2}, {"dp": 0}) as w:
        pg = w.mesh["dp"].get_group()
        ar = marking_all_reduce(dist.distributed_c10d.all_reduce)

        def f(x):
            y = x * 2.0
            call(ar, y, pg)
            return y
        gm = make_fx(f, tracing_mode="fake")(torch.zeros(3))
    nodes = [n for n in gm.graph.nodes if str(n.target) == "c10d.allreduce_.default"]
    assert len(nodes) == 1 and len(unmarked_all_reduces(gm)) == (0 if nodes[0].meta.get(
        ISSUED_BY) else 1)
    return [bool(n.meta.get(ISSUED_BY)) for n in nodes]


def test_a_plain_call_is_marked():
    assert _marks(lambda ar, y, pg: ar(y, group=pg)) == [True]
    assert _marks(lambda ar, y, pg: ar(y, dist.ReduceOp.SUM, pg)) == [True]


def test_a_duck_typed_group_is_not_marked():
    assert _marks(lambda ar, y, pg: ar(y, group=_DuckGroup(pg))) == [False]


def test_a_torch_function_mode_taking_over_is_not_marked():
    def call(ar, y, pg):
        with _TakeOver(pg):
            ar(y, group=pg)
    assert _marks(call) == [False]


def test_a_dispatch_mode_of_the_train_file_is_not_marked():
    """R30-1: a ``TorchDispatchMode`` sees ``c10d.allreduce_`` and may answer it with a work
    that is already completed; under one, the call is not plain (the op is recorded and
    reduces the tensor given: only the mode tells)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from spec_lang.torch_frontend.all_reduce_mark import foreign_modes

    class Watch(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    def call(ar, y, pg):
        assert foreign_modes() == []
        with Watch():
            assert foreign_modes() == [Watch.__qualname__]
            ar(y, group=pg)
    assert _marks(call) == [False]


def test_an_all_reduce_of_another_tensor_is_not_marked():
    """The node recorded must reduce the tensor given (here the group reduces a copy)."""
    class Other(_DuckGroup):
        def allreduce(self, tensors, opts):
            return self.pg.allreduce([tensors[0] * 1.0], opts)
    assert _marks(lambda ar, y, pg: ar(y, group=Other(pg))) == [False]


def test_the_marking_wrapper_keeps_torchs_name():
    """A mode that picks ``dist.all_reduce`` by name sees the same name in the capture as in
    the real run (else the capture would trace the mode passing it through)."""
    ar = marking_all_reduce(dist.distributed_c10d.all_reduce)
    assert (ar.__name__, ar.__module__) == ("all_reduce", "torch.distributed.distributed_c10d")
