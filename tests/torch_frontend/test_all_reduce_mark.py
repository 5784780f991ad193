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


class _Enters(TorchDispatchModeBase := __import__(
        "torch.utils._python_dispatch", fromlist=["TorchDispatchMode"]).TorchDispatchMode):
    """Lets every op through (r30c_01's DoneWork would hand back a completed work)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def _found_inside(enter) -> tuple[list[bool], list[str]]:
    """The marks of the all-reduce recorded when ``enter(mode)`` (True: it entered the mode)
    runs *inside* the call, from
    ``torch.Tensor.is_complex`` (R30c-1: after ``plain_call``'s look at the mode stacks), and
    what the marking wrapper's op guard found (the node's ``NOT_PLAIN``)."""
    from spec_lang.torch_frontend.all_reduce_mark import NOT_PLAIN

    mode = _Enters()
    state = {"in": False}
    orig = torch.Tensor.is_complex

    def is_complex(self):
        if not state["in"]:
            state["in"] = enter(mode)
        return orig(self)

    def call(ar, y, pg):
        torch.Tensor.is_complex = is_complex
        try:
            ar(y, group=pg)
        finally:
            del torch.Tensor.is_complex
            if state["in"]:
                mode.__exit__(None, None, None)

    with fake_world({"dp": 2}, {"dp": 0}) as w:
        pg = w.mesh["dp"].get_group()
        ar = marking_all_reduce(dist.distributed_c10d.all_reduce)

        def f(x):
            y = x * 2.0
            call(ar, y, pg)
            return y
        gm = make_fx(f, tracing_mode="fake")(torch.zeros(3))
    nodes = [n for n in gm.graph.nodes if str(n.target) == "c10d.allreduce_.default"]
    found = [n.meta.get(NOT_PLAIN) for n in nodes]
    return [bool(n.meta.get(ISSUED_BY)) for n in nodes], found


def test_a_dispatch_mode_entered_inside_the_call_is_not_marked():
    """R30c-1 (``r30c_01``): the mode entered by a replaced ``torch.Tensor.is_complex`` inside
    ``dist.all_reduce`` and left active: not marked (here the mode's class is of this test
    module, older than the baseline: the mode is named as active after the call; its frame on
    the op's path is :func:`test_the_op_guard_sees_a_mode_on_the_call_path_only_there`)."""
    marks, found = _found_inside(lambda m: m.__enter__() is not None)
    assert marks == [False]
    assert found == ["the torch function or dispatch mode _Enters active after the call"], found


def test_a_tensor_method_replaced_around_the_call_is_still_marked():
    """``r30c_02`` (right, EQUIVALENT): ``torch.Tensor.is_complex`` replaced around the call,
    no mode entered: nothing of the train file runs at the op."""
    marks, found = _found_inside(lambda m: False)
    assert marks == [True] and found == [None], (marks, found)


def test_the_op_guard_sees_a_mode_on_the_call_path_only_there():
    """The frame check alone: a mode entered and left inside the call (nothing left on the
    stacks before or after) is named by its frame at the op."""
    from spec_lang.torch_frontend.op_guard import current_baseline, tampered, watching

    current_baseline()      # (a capture child takes it before the train file is imported)
    ns: dict = {}           # the train file's code: compiled after the baseline
    exec(compile("from torch.utils._python_dispatch import TorchDispatchMode\n"
                 "class Late(TorchDispatchMode):\n"
                 "    def __torch_dispatch__(self, func, types, args=(), kwargs=None):\n"
                 "        return func(*args, **(kwargs or {}))\n", "train_file.py", "exec"), ns)
    found: list[str] = []
    with fake_world({"dp": 2}, {"dp": 0}) as w:
        pg = w.mesh["dp"].get_group()

        def inside(y):
            with ns["Late"]():
                dist.distributed_c10d.all_reduce(y, group=pg)

        def f(x):
            y = x * 2.0
            with watching(found):
                inside(y)
            assert tampered() == []
            return y
        make_fx(f, tracing_mode="fake")(torch.zeros(3))
    assert found, found       # every node recorded under the mode (the all-reduce's too)
    assert all(f.startswith("code of the train file ran inside the call, at train_file.py:4 "
                            "(__torch_dispatch__)") for f in found), found


def test_the_op_guard_finds_nothing_on_a_plain_call():
    from spec_lang.torch_frontend.op_guard import tampered, watching

    found: list[str] = []
    with fake_world({"dp": 2}, {"dp": 0}) as w:
        pg = w.mesh["dp"].get_group()

        def f(x):
            y = x * 2.0
            with watching(found):
                dist.distributed_c10d.all_reduce(y, group=pg)
            return y
        gm = make_fx(f, tracing_mode="fake")(torch.zeros(3))
    assert found == [] and tampered() == []
    assert [str(n.target) for n in gm.graph.nodes].count("c10d.allreduce_.default") == 1


def test_tampering_a_collective_reads_is_named():
    """R30c-1's hooks, seen after the call: a ``torch.Tensor`` method added,
    ``_world._pg_coalesce_state`` a dict subclass (``r30c_05``), an object of a class made
    after the baseline in its state, a trace function, a dispatch mode left active."""
    import sys

    from torch.distributed import distributed_c10d as c10d

    from spec_lang.torch_frontend.op_guard import current_baseline, tampered

    from spec_lang.torch_frontend.op_guard import namespaces

    base = current_baseline()
    assert tampered(base) == []
    before = namespaces()
    torch.Tensor.is_complex = lambda self: False
    try:           # changed during the call; replaced around it (r30c_02, right) is not named
        assert tampered(base, before) == ["torch.Tensor.is_complex changed during the call"]
        assert tampered(base, namespaces()) == [] and tampered(base) == []
    finally:
        del torch.Tensor.is_complex
    assert tampered(base, before) == []
    world = c10d._world
    orig = world._pg_coalesce_state

    class Coalescing(dict):
        pass
    world._pg_coalesce_state = Coalescing(orig)
    try:
        assert tampered(base) == ["distributed_c10d._world._pg_coalesce_state (a Coalescing)"]
    finally:
        world._pg_coalesce_state = orig

    class Key:
        pass
    orig[Key()] = []
    try:
        assert tampered(base) == ["distributed_c10d._world._pg_coalesce_state (holding a Key)"]
    finally:
        orig.clear()
    old = sys.gettrace()
    sys.settrace(lambda *a: None)
    try:
        assert tampered(base) == ["a trace or profile function set (sys.settrace / setprofile)"]
    finally:
        sys.settrace(old)
    with _Enters():
        assert tampered(base) == ["the torch function or dispatch mode _Enters active"]
    assert tampered(base) == []


def test_a_work_wait_replaced_is_named_until_it_is_put_back():
    """R31-1 (adversarial round 31): a hook inside the call swaps ``Work.wait`` (or
    ``FakeWork.wait``) for a no-op that puts the original back; ``work_changes`` names it while
    it is swapped (the op is recorded then), nothing once it is back."""
    from torch._C import _distributed_c10d as c

    from spec_lang.torch_frontend.op_guard import current_baseline, tampered, work_changes

    base = current_baseline()
    assert work_changes(base) == []
    for cls in (c.Work, c.FakeWork):
        orig = vars(cls)["wait"]
        cls.wait = lambda self, timeout=None: True
        try:
            assert work_changes(base) == [f"{cls.__name__}.wait"]
            assert f"torch's {cls.__name__}.wait replaced" in tampered(base)
        finally:
            cls.wait = orig
        assert work_changes(base) == []
