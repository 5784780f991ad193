"""``zero_()`` / ``fill_(v)`` of a flat gradient bucket (``buckets.FILLS`` / ``buckets.filled``;
round 38, R37b-4: Megatron's ``zero_grad_buffer``): float64 soundness against torch (the IR
evaluated with ``spec_lang.evaluate``, the function run by torch) on random shapes and values,
and UNKNOWN (or a pass-1 refusal) for every fill that is not of a whole bucket.

The end-to-end plans (right and wrong) are ``tests/adversarial/plans/round38/``
(``tests/adversarial/test_round38_bucket.py``)."""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from spec_lang.torch_frontend.lower import Opaque
from spec_lang.torch_frontend.values import TV
from tests.torch_frontend.harness import check_fn, float64_default, lower_fn, ops_of  # noqa: F401


def _t(rng: np.random.Generator, *shape: int) -> torch.Tensor:
    return torch.tensor(rng.standard_normal(shape), dtype=torch.float64)


@settings(max_examples=6, deadline=None)
@given(sizes=st.lists(st.integers(2, 5), min_size=3, max_size=3), seed=st.integers(0, 2**31))
def test_zeroed_main_grad_buffer_is_sound(sizes, seed):
    """R37b-4: Megatron's buffer (``zeros(n)`` cut by its ``main_grad`` views) zeroed before
    and between accumulations: the views taken before the ``zero_`` read zeros, then what is
    added after it; a ``clone`` taken before keeps the old values; ``fill_``, ``mul_(0)`` and a
    ``zero_`` through a whole view (``buf.view(-1)``) or through one piece likewise."""
    rng = np.random.default_rng(seed)
    h, f, e = sizes
    xs = [_t(rng, f, h), _t(rng, e), _t(rng, h, e)]

    def fn(a, b, c):
        na, nb = a.numel(), b.numel()
        buf = torch.zeros(na + nb + c.numel())
        ma, mb, mc = buf[:na].view_as(a), buf[na:na + nb], buf[na + nb:].view_as(c)
        buf.zero_()                                 # zero_grad_buffer at the step's start
        ma.add_(a)
        mb.add_(b)
        mc.add_(c)
        kept = ma.clone()                           # a copy: the old value
        buf.zero_()                                 # zeroed again: the first pass is lost
        ma.add_(torch.tanh(a))
        mb.add_(b * b)
        mc.add_(torch.exp(c))
        buf.div_(2.0)
        after_div = mb * 1.0
        buf.view(-1).fill_(0.25)                    # through a whole view
        mc.add_(c)
        first = ma * 1.0
        ma.zero_()                                  # one piece (buckets.piece_write)
        mb.mul_(0)
        return kept, after_div, first, ma + a, mb, mc, buf[na + nb:].view_as(c).t()

    low = check_fn(fn, *xs)
    assert {"aten.zero_.default", "aten.fill_.Scalar"} <= ops_of(low.gm)
    assert all(isinstance(o, TV) for o in low.outputs), low.outputs


@settings(max_examples=6, deadline=None)
@given(sizes=st.lists(st.integers(2, 5), min_size=3, max_size=3), seed=st.integers(0, 2**31))
def test_zeroed_cat_bucket_is_sound(sizes, seed):
    """``zero_`` of a ``torch.cat`` bucket after its all-reduce-like scaling: the gradient
    views (``p.grad = flat[a:b].view_as(p)``) read zeros, a split taken after it its pieces,
    and a later write of a bucket into it wins again."""
    rng = np.random.default_rng(seed)
    h, f, e = sizes
    xs = [_t(rng, f, h), _t(rng, e), _t(rng, h, e)]

    def fn(a, b, c):
        na, nb = a.numel(), b.numel()
        flat = torch.cat([a.reshape(-1), b, c.reshape(-1)])
        va, vc = flat[:na].view_as(a), flat[na + nb:].view_as(c)
        flat.mul_(3.0)
        flat.zero_()
        zeroed = va * a + 1.0
        pa, pb, pc = flat.split([na, nb, c.numel()])
        pb.add_(b)
        flat.copy_(torch.cat([a.reshape(-1), b * 2.0, c.reshape(-1)]))
        return zeroed, pa.view_as(a), pb, vc

    check_fn(fn, *xs)


def test_fills_of_no_whole_bucket_stay_unknown():
    """A fill through a view pass 1 could not name, through a block of a piece or a slice
    across two pieces, with a value the dtype cannot hold, or with a tensor value, is never a
    bucket of zeros: every reader is UNKNOWN (or pass 1 refuses the view)."""
    rng = np.random.default_rng(0)
    a, b = _t(rng, 3, 4), _t(rng, 5)

    def unnamed_view_before(a, b):     # a view of a piece to another shape, taken before
        flat = torch.cat([a.reshape(-1), b])
        va = flat[:12].view(4, 3)
        flat.zero_()
        return (va.t() * 1.0,)

    def straddling(a, b):              # zero_ of a slice across both pieces
        buf = torch.zeros(17)
        va, vb = buf[:12].view_as(a), buf[12:17]
        va.add_(a)
        vb.add_(b)
        buf[10:14].zero_()
        return (va * 1.0, vb * 1.0)

    def block_of_a_piece(a, b):        # a row of piece 0 zeroed: no piece
        flat = torch.cat([a.reshape(-1), b])
        va = flat[:12].view_as(a)
        flat[:12].view(3, 4)[1].zero_()
        return (va * 1.0, flat[12:] * 1.0)

    def int_fill(a, b):                # fill_(0.5) of an int64 buffer: torch truncates to 0
        buf = torch.zeros(17, dtype=torch.int64)
        va, vb = buf[:12].view_as(a), buf[12:17]
        buf.fill_(0.5)
        return (va * a, vb * b)

    def tensor_fill(a, b):             # fill_ with a 0-d tensor (fill_.Tensor): no rule
        flat = torch.cat([a.reshape(-1), b])
        va = flat[:12].view_as(a)
        flat.fill_(a.sum())
        return (va * 1.0,)

    for fn in (unnamed_view_before, straddling, block_of_a_piece, int_fill, tensor_fill):
        try:
            outs = lower_fn(fn, a, b).outputs
        except AssertionError as e:      # pass 1: a view or slice it gives no dims
            assert "no dims" in str(e), (fn.__name__, e)
            continue
        assert all(isinstance(o, Opaque) for o in outs), (fn.__name__, outs)


def test_fills_are_no_piecewise_ops():
    """A fill reads no entry: it is not lowered as an op on each piece (``_piecewise``) but as
    one constant of no dims on every piece (``buckets.filled``)."""
    from spec_lang.torch_frontend import buckets

    assert buckets.FILLS == {"aten.zero_.default", "aten.fill_.Scalar"}
    assert not buckets.FILLS & buckets.PIECEWISE
