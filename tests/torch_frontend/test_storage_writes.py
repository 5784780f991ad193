"""Writes into a tensor's memory counted per storage at the trace's fake tensor mode
(``spec_lang/torch_frontend/storage_writes.py``; rounds 43a, 43c, 43e: R43a-1, R43c-2, R43e-1,
R43e-4): through ``.data`` (no version counter bumps), in place, by a ``c10d`` op; counted only
while :func:`storage_writes.counted` is on, and seen by :func:`recompute.param_versions`."""

from __future__ import annotations

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from spec_lang.torch_frontend import storage_writes as sw
from spec_lang.torch_frontend.recompute import param_versions


def test_a_write_through_data_is_counted_where_the_version_counter_is_not():
    with FakeTensorMode() as mode:
        p = torch.nn.Parameter(torch.zeros(4))
        q = torch.zeros(4)
        before = param_versions(p)
        with sw.counted():
            v0 = param_versions(p)
            p.data.add_(1.0)                         # R43e-1: bumps no counter of p
            assert p._version == 0 and sw.count(p) == 1 and param_versions(p) != v0
            q.mul_(2.0)
            assert sw.count(q) == 1 and sw.count(p) == 1
            with torch.no_grad():
                p.add_(1.0)                          # in place: counter and count
            assert sw.count(p) == 2 and p._version == 1
            assert sw.count(torch.ones(2)) == 0
        assert sw.count(p) == 0 and "dispatch" not in vars(mode)    # off: dropped
    assert before == (0, 0)


def test_the_writes_of_an_op_are_its_marked_arguments_and_every_c10d_tensor():
    """R43c-2: ``c10d::allreduce_`` marks no ``Tensor(a!)`` argument."""
    import torch.distributed  # noqa: F401  (registers the c10d ops)

    t, u = torch.zeros(2), torch.ones(2)
    assert sw.written(torch.ops.c10d.allreduce_.default, ([t, u], None), {}) == [t, u]
    assert sw.written(torch.ops.aten.add_.Tensor, (t, u), {}) == [t]
    assert sw.written(torch.ops.aten.add.out, (t, u), {"out": u}) == [u]
    assert sw.written(torch.ops.aten.add.Tensor, (t, u), {}) == []
    assert sw.storage_of(t) == sw.storage_of(t.data) != sw.storage_of(u)
