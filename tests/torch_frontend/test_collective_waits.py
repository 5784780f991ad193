"""A functional collective's buffer is read only after ``wait_tensor`` (``waits.py``; adversarial
round 28, R28-1): ``torch.ops._c10d_functional.all_reduce`` returns a buffer the backend fills in
the background, so a read before the wait (or with none) is UNKNOWN, never the reduced value.
Views of the buffer read nothing; a read after the wait (of the wait's output or of the raw
buffer, which alias) is the reduced value."""

from __future__ import annotations

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from spec_lang.term import Op
from spec_lang.torch_frontend.literals import Traces
from spec_lang.torch_frontend.lower import Opaque, _storage_roots
from spec_lang.torch_frontend.values import TV
from spec_lang.torch_frontend.waits import PendingCollectives, is_async_collective
from tests.torch_frontend.harness import lower_fn

F = torch.ops._c10d_functional
X = torch.randn(3, 4)


@pytest.fixture(autouse=True)
def _group_is_an_axis(monkeypatch):
    """The traces know the process group ``"g0"`` as mesh axis ``dp``."""
    init = Traces.__init__

    def with_group(self, main, coords, groups, *a, **k):
        init(self, main, coords, {"g0": "dp"}, *a, **k)
    monkeypatch.setattr(Traces, "__init__", with_group)


def _reduced(v) -> bool:
    """Whether ``v`` is a value computed from the all-reduce's sum (an ALL_REDUCE in its term)."""
    if not isinstance(v, TV):
        return False
    stack = [v.term]
    while stack:
        t = stack.pop()
        if t.op is Op.ALL_REDUCE:
            return True
        stack.extend(t.args)
    return False


def test_a_read_before_wait_tensor_is_unknown_and_after_is_the_sum():
    def f(x):
        g = F.all_reduce(x, "sum", "g0")
        early = g * 2.0                         # before the wait: the backend may not be done
        F.wait_tensor(g)
        return early, g * 3.0                   # after the wait: the raw buffer is the sum
    early, after = lower_fn(f, X).outputs
    assert isinstance(early, Opaque) and "before its wait_tensor" in early.why, early
    assert _reduced(after), after


def test_a_read_of_the_waits_output_is_the_sum():
    def f(x):
        return F.wait_tensor(F.all_reduce(x, "sum", "g0")) * 2.0
    (out,) = lower_fn(f, X).outputs
    assert _reduced(out), out


def test_a_view_taken_before_the_wait_and_read_after_it_is_the_sum():
    def f(x):
        g = F.all_reduce(x, "sum", "g0")
        v = g.view(-1)                          # a view reads nothing
        F.wait_tensor(v)                        # the work is found by its storage
        return v * 2.0, g * 3.0
    outs = lower_fn(f, X).outputs
    assert all(_reduced(o) for o in outs), outs


def test_a_buffer_never_waited_is_unknown():
    def f(x):
        g = F.all_reduce(x, "sum", "g0")
        return (g,)
    (out,) = lower_fn(f, X).outputs
    assert isinstance(out, Opaque) and "never waited" in out.why, out


def test_an_in_place_write_before_the_wait_leaves_the_buffer_unknown():
    def f(x):
        g = F.all_reduce(x, "sum", "g0")
        g.mul_(2.0)                             # races the backend's write
        return (F.wait_tensor(g) * 1.0,)
    (out,) = lower_fn(f, X).outputs
    assert isinstance(out, Opaque), out


def test_writing_the_input_of_an_all_reduce_before_its_wait_is_sound():
    """``all_reduce`` reduces a clone of its input: writing the input at once is fine."""
    def f(x):
        y = x * 1.0
        g = F.all_reduce(y, "sum", "g0")
        y.mul_(0.0)
        return (F.wait_tensor(g) * 1.0,)
    (out,) = lower_fn(f, X).outputs
    assert _reduced(out), out


def test_a_collective_that_reads_its_input_later_sees_an_early_write():
    """``all_gather_into_tensor`` reads its input in the background until the wait: a write
    into the input before the wait is the collective's business (found), after it is not."""
    def f(x):
        y = x * 1.0
        g = F.all_gather_into_tensor(y, 2, "g0")
        y.mul_(0.0)
        out = F.wait_tensor(g)
        y.mul_(3.0)
        return out
    gm = make_fx(f, tracing_mode="fake")(X)
    roots = _storage_roots(gm)
    waits = PendingCollectives(roots, ())
    writes = [n for n in gm.graph.nodes if str(n.target) == "aten.mul_.Tensor"]
    coll = next(n for n in gm.graph.nodes if is_async_collective(n))
    found = []
    for n in gm.graph.nodes:
        if n in writes:
            found.append(waits.early_input_write([n.args[0]]))
        waits.after(n)
    assert found == [coll, None], found
