"""``fsdp_freed``: FSDP2's unsharded parameter memory freed at a reshard and allocated again at
an unshard (round 48a, R48a-2), on fake tensors inside ``make_fx`` as the capture traces."""

from __future__ import annotations

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from spec_lang.errors import PlanError
from spec_lang.torch_frontend import fsdp_freed as ff

WHAT = "FSDP2's unsharded parameter of w2.weight (train.py:7)"


def _traced(step):
    """``step(w)`` run on a fake (3, 4) float64 tensor under make_fx, inside the refusal."""
    def fn(x):
        with ff.freed_reads_refused("train.py"):
            return step(torch.nn.Parameter(x * 1.0))
    return make_fx(fn, tracing_mode="fake")(torch.zeros(3, 4, dtype=torch.float64))


def test_a_freed_leaf_answers_size_zero_and_alloc_gives_it_back():
    seen = []

    def step(w):
        ff.free(w, WHAT)
        seen.append((w.untyped_storage().size(), ff.is_freed(w), tuple(w.shape)))
        ff.alloc(w)
        seen.append((w.untyped_storage().size(), ff.is_freed(w), tuple(w.shape)))
        return (w * 2.0).sum()

    _traced(step)
    assert seen == [(0, True, (3, 4)), (96, False, (3, 4))]


@pytest.mark.parametrize("read", [
    lambda w: w * 2.0,                  # a computation
    lambda w: w.t().contiguous(),       # through a view of it
    lambda w: w.detach().sum(),
    lambda w: w.as_strided((4, 3), (1, 4)),
])
def test_a_read_of_freed_memory_is_refused_naming_the_parameter(read):
    def step(w):
        ff.free(w, WHAT)
        return read(w)

    with pytest.raises(PlanError) as e:
        _traced(step)
    msg = str(e.value)
    assert msg.startswith("train.py:") and WHAT in msg and "R48a-2" in msg


def test_a_write_into_freed_memory_is_named_a_write():
    def step(w):
        ff.free(w, WHAT)
        with torch.no_grad():
            w.zero_()
        return w.shape[0]

    with pytest.raises(PlanError, match=r"aten\.zero_\.default writes into FSDP2's"):
        _traced(step)


def test_a_refusal_the_step_catches_is_raised_at_the_end():
    def step(w):
        ff.free(w, WHAT)
        try:
            w.sum()
        except Exception:   # noqa: BLE001 -- the train file swallowing the refusal
            pass
        return w.shape[0]

    with pytest.raises(PlanError, match="R48a-2"):
        _traced(step)


def test_freeing_twice_is_once_and_the_end_of_the_block_restores():
    kept = []

    def step(w):
        ff.free(w, WHAT)
        ff.free(w, WHAT)
        kept.append(w)
        return w.shape[0]

    _traced(step)
    assert not ff.is_freed(kept[0]) and kept[0].untyped_storage().size() == 96


def test_shardproofs_own_read_inside_allocated_is_not_refused():
    """``left_over``'s ``get_gradient_edge`` takes a view of the leaf: inside ``allocated``
    it is not refused, and the leaf is freed again after."""
    kept = []

    def step(w):
        ff.free(w, WHAT)
        with ff.allocated(w):
            out = w.view_as(w)
        kept.append(ff.is_freed(w))
        return out.shape

    _traced(step)
    assert kept == [True]


def test_a_real_tensor_is_never_freed():
    w = torch.ones(3, 4)
    ff.free(w, WHAT)
    assert not ff.is_freed(w) and w.untyped_storage().size() == 48
    assert torch.equal(w * 2.0, torch.full((3, 4), 2.0))


def test_outside_a_fake_trace_nothing_is_refused():
    with ff.freed_reads_refused("train.py"):
        assert float((torch.ones(2) * 3.0).sum()) == 6.0
