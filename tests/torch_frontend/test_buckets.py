"""Flat gradient buckets (``spec_lang/torch_frontend/buckets.py``): float64 soundness of the
lowering (both sides evaluated: the IR with ``spec_lang.evaluate``, the function with torch) on
random shapes and values, and UNKNOWN for every other use of a bucket.

The collectives on a bucket (piece by piece) and the real-size check of a slice's bounds are
exercised end to end by ``tests/adversarial/test_round35_bucket.py``."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from spec_lang.torch_frontend.lower import Opaque
from spec_lang.torch_frontend.values import TV
from tests.torch_frontend.harness import check_fn, float64_default, lower_fn, ops_of  # noqa: F401


def _t(rng: np.random.Generator, *shape: int) -> torch.Tensor:
    return torch.tensor(rng.standard_normal(shape), dtype=torch.float64)


def _unflatten(flat: torch.Tensor, like: list[torch.Tensor]) -> list[torch.Tensor]:
    out, a = [], 0
    for p in like:
        b = a + p.numel()
        out.append(flat[a:b].view_as(p))
        a = b
    return out


@settings(max_examples=6, deadline=None)
@given(sizes=st.lists(st.integers(2, 5), min_size=5, max_size=5), seed=st.integers(0, 2**31),
       order=st.permutations([0, 1, 2]))
def test_bucket_ops_are_sound(sizes, seed, order):
    rng = np.random.default_rng(seed)
    h, f, e, k, m = sizes
    xs = [_t(rng, f, h), _t(rng, h), _t(rng, e, k, m)]
    xs = [xs[i] for i in order]

    def fn(a, b, c):
        # a second bucket of the same pieces (the same named dims: a gradient's copy)
        u, v, w = torch.tanh(a), b * b, torch.exp(c)
        flat = torch.cat([a.reshape(-1), b.view(-1), c.reshape(-1)])
        other = torch.cat([u.reshape(-1), v.view(-1), w.reshape(-1)])
        flat = flat.mul(0.5)
        flat.div_(3)
        flat.add_(other, alpha=2.0)
        s = (flat - other * 0.25).clone()
        s = -(s / 4 + 1.5)
        dst = torch.zeros_like(s)
        dst.copy_(s)
        return tuple(_unflatten(dst, [a, b, c])) + tuple(_unflatten(flat.view(-1), [a, b, c]))

    low = check_fn(fn, *xs)
    assert {"aten.cat.default", "aten.slice.Tensor", "aten.copy_.default"} <= ops_of(low.gm)
    assert all(isinstance(o, TV) for o in low.outputs)


@settings(max_examples=4, deadline=None)
@given(sizes=st.lists(st.integers(2, 5), min_size=2, max_size=2), seed=st.integers(0, 2**31))
def test_bucket_of_a_size_one_piece_and_same_numels(sizes, seed):
    rng = np.random.default_rng(seed)
    h, f = sizes
    xs = [_t(rng, f, h), _t(rng, h, f), _t(rng, 1)]

    def fn(a, b, c):
        flat = torch.cat([a.reshape(-1), b.reshape(-1), c.view(-1)]) * 2.0
        return tuple(_unflatten(flat, [a, b, c]))

    check_fn(fn, *xs)


def _outputs(fn, *xs) -> list:
    return lower_fn(fn, *xs).outputs


def test_other_uses_of_a_bucket_are_unknown():
    rng = np.random.default_rng(0)
    a, b = _t(rng, 3, 4), _t(rng, 4, 5)

    def reductions(a, b):
        flat = torch.cat([a.reshape(-1), b.reshape(-1)])
        return (flat.sum(), flat.norm(), flat.view(4, 8)[0], flat * torch.ones(32),
                torch.cat([flat, flat])[:32], flat.chunk(2)[0])

    outs = _outputs(reductions, a, b)
    assert all(isinstance(o, Opaque) for o in outs), outs
    assert "flat bucket" in outs[0].why


def test_a_slice_across_a_boundary_is_unknown():
    rng = np.random.default_rng(0)
    a, b = _t(rng, 3, 4), _t(rng, 4, 5)

    def shifted(a, b):
        flat = torch.cat([a.reshape(-1), b.reshape(-1)])
        return flat[1:13].view_as(a)

    with pytest.raises(AssertionError, match="not one of its pieces"):
        lower_fn(shifted, a, b)


def test_buckets_of_other_pieces_do_not_add():
    rng = np.random.default_rng(0)
    a, b = _t(rng, 3, 4), _t(rng, 4, 3)

    def swapped(a, b):
        x = torch.cat([a.reshape(-1), b.reshape(-1)])
        y = torch.cat([b.reshape(-1), a.reshape(-1)])
        return (x + y)[:12].view_as(a)

    outs = _outputs(swapped, a, b)
    assert isinstance(outs[0], Opaque), outs


# -- round 36: views of the bucket written after, split_with_sizes, cat(out=) ------------------

@settings(max_examples=6, deadline=None)
@given(sizes=st.lists(st.integers(2, 5), min_size=4, max_size=4), seed=st.integers(0, 2**31))
def test_views_of_pieces_read_the_bucket_written_after(sizes, seed):
    """R35b-1: ``p.grad = flat[a:b].view_as(p)`` taken before ``flat.div_(n)`` (and other
    whole-bucket writes) reads piece k of the written bucket, through relabelling views."""
    rng = np.random.default_rng(seed)
    h, f, e, k = sizes
    xs = [_t(rng, f, h), _t(rng, h), _t(rng, e, k)]

    def fn(a, b, c):
        flat = torch.cat([a.reshape(-1), b.view(-1), c.reshape(-1)])
        alias = flat.detach()
        va = flat[: a.numel()].view_as(a)
        vb = alias[a.numel(): a.numel() + b.numel()]
        vc = flat[a.numel() + b.numel():].view_as(c).t()
        flat.div_(3)
        alias.mul_(0.5)
        flat.add_(1.25)
        return va, vb, vc, flat[: a.numel()].view_as(a)

    low = check_fn(fn, *xs)
    assert "aten.div_.Tensor" in ops_of(low.gm)


@settings(max_examples=6, deadline=None)
@given(sizes=st.lists(st.integers(2, 5), min_size=3, max_size=3), seed=st.integers(0, 2**31))
def test_split_with_sizes_of_a_bucket_is_sound(sizes, seed):
    """R35b-2: ``flat.split(numels)`` is the list of pieces (also as views written after)."""
    rng = np.random.default_rng(seed)
    h, f, e = sizes
    xs = [_t(rng, f, h), _t(rng, e), _t(rng, h, e)]

    def fn(a, b, c):
        flat = torch.cat([a.reshape(-1), b.view(-1), c.reshape(-1)]) * 2.0
        pa, pb, pc = flat.split([a.numel(), b.numel(), c.numel()])
        va = pa.view_as(a)
        flat.sub_(0.75)
        return va, pb, pc.view_as(c), torch.split(flat, [a.numel(), b.numel(), c.numel()])[2]

    low = check_fn(fn, *xs)
    assert "aten.split_with_sizes.default" in ops_of(low.gm)


@settings(max_examples=6, deadline=None)
@given(sizes=st.lists(st.integers(2, 5), min_size=3, max_size=3), seed=st.integers(0, 2**31))
def test_cat_out_into_a_buffer_is_sound(sizes, seed):
    """R35b-3: ``torch.cat(gs, out=buf)`` is the bucket written into all of ``buf``: the
    result and ``buf`` read it (views of ``buf`` taken before the cat are no pieces: pass 1
    knows ``buf`` as an uninitialised tensor of its own dim, UNKNOWN)."""
    rng = np.random.default_rng(seed)
    h, f, e = sizes
    xs = [_t(rng, f, h), _t(rng, e)]

    def fn(a, b):
        buf = torch.empty(a.numel() + b.numel())
        got = torch.cat([a.reshape(-1), b.view(-1)], out=buf)
        vb = buf[a.numel():]
        got.mul_(4)
        buf.div_(2)
        return tuple(_unflatten(buf, [a, b])) + (vb,)

    low = check_fn(fn, *xs)
    assert "aten.cat.out" in ops_of(low.gm)


def test_round36_other_writes_and_reads_stay_unknown():
    rng = np.random.default_rng(0)
    a, b = _t(rng, 3, 4), _t(rng, 4, 5)

    def zeroed(a, b):                # not piecewise: every view of the bucket is unknown (a
        flat = torch.cat([a.reshape(-1), b.reshape(-1)])     # zero_ is a bucket of zeros since
        va = flat[:12].view_as(a)                            # round 38: test_bucket_fills)
        flat.addcmul_(flat, torch.ones(32))
        return (va,)

    def piece_written(a, b):         # a write through a block of a piece: readers unknown
        flat = torch.cat([a.reshape(-1), b.reshape(-1)])
        va = flat[:12].view_as(a)
        flat[12:].view(4, 5)[:2].mul_(2)
        return (va,)

    def slice_of_a_piece(a, b):      # a block of a piece (no relabelling of it)
        flat = torch.cat([a.reshape(-1), b.reshape(-1)])
        va = flat[:12].view(3, 4)[:, :2]
        flat.div_(2)
        return (va,)

    def into_a_slice(a, b):          # cat(out=) into part of a buffer: its readers unknown
        big = torch.zeros(64)
        whole = big.view(-1)
        torch.cat([a.reshape(-1), b.reshape(-1)], out=big[32:])
        return (whole,)

    for fn in (zeroed, piece_written, slice_of_a_piece, into_a_slice):
        outs = _outputs(fn, a, b)
        assert all(isinstance(o, Opaque) for o in outs), (fn.__name__, outs)


def test_out_of_place_division_leaves_the_views_alone():
    """``flat = flat / n`` is a new tensor: views of the old bucket keep its values."""
    rng = np.random.default_rng(1)
    a, b = _t(rng, 3, 4), _t(rng, 4, 5)

    def rebound(a, b):
        flat = torch.cat([a.reshape(-1), b.reshape(-1)])
        va = flat[:12].view_as(a)
        flat = flat / 2
        return va, flat[12:].view_as(b)

    check_fn(rebound, a, b)


@pytest.mark.parametrize("fn", [
    lambda a, b: torch.cat([a.reshape(-1), b.reshape(-1)]).split([13, 19])[0],  # off by one
    lambda a, b: torch.cat([a.reshape(-1), b.reshape(-1)]).split([20, 12])[0],  # wrong order
    lambda a, b: torch.cat([a.reshape(-1), b.reshape(-1)]).split(16)[0],    # equal blocks
    lambda a, b: torch.cat([a.reshape(-1), b.reshape(-1)], out=torch.empty(33)),   # too long
    lambda a, b: torch.cat([a.reshape(-1), b.reshape(-1)],                # a cast
                           out=torch.empty(32, dtype=torch.float32)),
    lambda a, b: a.reshape(-1).split([5, 7])[0],          # a split of no bucket
], ids=["off_by_one", "order", "equal_blocks", "out_too_long", "out_float32", "no_bucket"])
def test_splits_and_cat_outs_that_are_no_pieces_are_refused(fn):
    rng = np.random.default_rng(0)
    a, b = _t(rng, 3, 4), _t(rng, 4, 5)
    with pytest.raises(AssertionError, match="no dims|not one of its pieces"):
        low = lower_fn(fn, a, b)
        assert all(isinstance(o, Opaque) for o in low.outputs), low.outputs
        raise AssertionError("no dims: unknown")


def test_split_sizes_are_read_on_every_rank():
    """The sizes of a bucket's split are read by its rule: the same list on every traced rank
    (R35b-2; the real sizes are checked by the rule against the pieces' real numels)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from spec_lang.torch_frontend.literals import Traces

    def gm(sizes):
        def f(x):
            return x.split(sizes)
        return make_fx(f, tracing_mode="fake")(torch.zeros(32))

    main = gm([12, 20])
    node = next(n for n in main.graph.nodes if "split" in str(n.target))
    same = Traces(main, {"dp": 0}, {}, ranks=[({"dp": 1}, gm([12, 20]), {})])
    assert same.read_same_on_ranks(node, 1) == [12, 20]
    assert same.was_read(node, (1, 0))
    other = Traces(main, {"dp": 0}, {}, ranks=[({"dp": 1}, gm([20, 12]), {})])
    with pytest.raises(ValueError, match="on rank"):
        other.read_same_on_ranks(node, 1)


def test_cat_out_of_no_bucket_is_refused():
    """``cat(out=)`` of tensors that are no flat bucket is UNKNOWN (its value would be read
    with ``out``'s own named dims)."""
    rng = np.random.default_rng(0)
    a, b = _t(rng, 3, 4), _t(rng, 3, 4)
    with pytest.raises(AssertionError, match="no flat bucket"):
        lower_fn(lambda a, b: torch.cat([a, b], dim=1, out=torch.empty(3, 8)), a, b)


def test_a_split_written_after_gives_the_new_pieces():
    """Items of a bucket's split taken after a write of the bucket read the written pieces."""
    rng = np.random.default_rng(2)
    a, b = _t(rng, 3, 4), _t(rng, 4, 5)

    def fn(a, b):
        flat = torch.cat([a.reshape(-1), b.reshape(-1)])
        parts = flat.split([12, 20])
        flat.mul_(3)
        return parts[0].view_as(a), parts[1]

    check_fn(fn, a, b)


@pytest.mark.parametrize(("real_sizes", "ok"),
                         [([6, 20], True), ([20, 6], False), ([7, 19], False)])
def test_split_sizes_are_checked_at_the_real_sizes(real_sizes, ok):
    """R35b-2: the real twin of a bucket's split must split it into the pieces' numels at the
    real sizes (their named dims' real sizes: 2 x 3 and 4 x 5 here), not only at the probe
    sizes (``buckets._split``; a runnable plan is refused earlier by the dataflow check,
    r36_10)."""
    from types import SimpleNamespace

    from torch.fx.experimental.proxy_tensor import make_fx

    from spec_lang.term import DimSpec
    from spec_lang.torch_frontend.buckets import _split
    from spec_lang.torch_frontend.registry import Unsupported
    from spec_lang.torch_frontend.values import Bucket

    def node(sizes):
        gm = make_fx(lambda x: x.split(sizes), tracing_mode="fake")(torch.zeros(sum(sizes)))
        return next(n for n in gm.graph.nodes if "split" in str(n.target))

    n, y = node([12, 35]), node(real_sizes)
    dims = [(DimSpec("a"), DimSpec("b")), (DimSpec("c"), DimSpec("d"))]
    x = Bucket(tuple(TV(None, (d,)) for d in dims), (12, 35))
    twins = {n: y, n.args[0]: y.args[0]}
    tr = SimpleNamespace(real=True, twin=twins.get, read_same_on_ranks=lambda *a: None,
                         real_sizes={"a": 2, "b": 3, "c": 4, "d": 5}, axis_sizes={})
    ctx = SimpleNamespace(analysis=SimpleNamespace(marks={n: ("bucketsplit", 2)}), traces=tr,
                          layout=lambda m, i: (dims[i],),
                          fail=lambda m, why: Unsupported(str(m.target), "here", why))
    if ok:
        assert _split(ctx, n, x).values == x.pieces
    else:
        with pytest.raises(Unsupported, match="at the real sizes"):
            _split(ctx, n, x)


# -- round 37: in-place writes through one piece (accumulation into bucket views) -------------

@settings(max_examples=6, deadline=None)
@given(sizes=st.lists(st.integers(2, 5), min_size=4, max_size=4), seed=st.integers(0, 2**31))
def test_writes_through_one_piece_are_sound(sizes, seed):
    """R36b-3: an in-place op through piece k (``p.grad = flat[a:b].view_as(p)``, then
    ``p.grad.add_(g)``: a second micro-batch, Megatron's ``main_grad.add_``) gives the storage
    the bucket with piece k replaced: readers of piece k (through views, transposes, split
    items, the op's own result) read the new value, the other pieces keep theirs, whole-bucket
    writes after it see it."""
    rng = np.random.default_rng(seed)
    h, f, e, k = sizes
    xs = [_t(rng, f, h), _t(rng, e), _t(rng, h, k)]

    def fn(a, b, c):
        flat = torch.cat([a.reshape(-1), b.view(-1), c.reshape(-1)])
        va = flat[: a.numel()].view_as(a)
        vb = flat[a.numel(): a.numel() + b.numel()]
        vc = flat[a.numel() + b.numel():].view_as(c)
        va.add_(torch.tanh(a))                   # accumulate a second micro-batch
        va.add_(a, alpha=0.5)
        before = vb * 1.0                        # read before the write: the old value
        vc.t().mul_(3.0)                         # through a transpose of the piece
        vb.sub_(b * b)
        flat.div_(2.0)
        pa, pb, pc = flat.split([a.numel(), b.numel(), c.numel()])
        pc.add_(c.reshape(-1))                   # through an item of the split
        vb.copy_(torch.exp(b))
        pa.view_as(a).add_(c.sum(1))             # broadcast over a's first dim
        return va, vb, vc, before, pa, pb, flat[a.numel() + b.numel():].view_as(c).t()

    low = check_fn(fn, *xs)
    assert {"aten.add_.Tensor", "aten.split_with_sizes.default"} <= ops_of(low.gm)


def test_writes_through_no_piece_stay_unknown():
    """A write into a block of one piece, or through a piece of a storage whose value is no
    bucket any more, leaves every reader of the storage unknown (R36b-3's rule is for exactly
    one piece of a bucket; a slice across two pieces is refused in pass 1)."""
    rng = np.random.default_rng(0)
    a, b = _t(rng, 3, 4), _t(rng, 4, 5)

    def copied_over(a, b):           # the storage is no bucket any more when the piece is written
        flat = torch.cat([a.reshape(-1), b.reshape(-1)])    # (a zero_ keeps the bucket since
        va, vb = flat[:12].view_as(a), flat[12:].view_as(b)   # round 38: test_bucket_fills)
        flat.copy_(torch.ones(32))
        va.add_(a)
        return (va, vb)

    def block(a, b):
        flat = torch.cat([a.reshape(-1), b.reshape(-1)])
        va = flat[:12].view_as(a)
        va[:, 2:].add_(1.0)
        return (va, flat[12:].view_as(b))

    def selected(a, b):              # through a select (a slice view, not followed)
        flat = torch.cat([a.reshape(-1), b.reshape(-1)])
        va = flat[:12].view_as(a)
        flat[:12].view(3, 4).unsqueeze(0)[0].mul_(2.0)
        return (va,)

    for fn in (copied_over, block, selected):
        outs = _outputs(fn, a, b)
        assert all(isinstance(o, Opaque) for o in outs), (fn.__name__, outs)


@settings(max_examples=5, deadline=None)
@given(sizes=st.lists(st.integers(2, 5), min_size=2, max_size=2), seed=st.integers(0, 2**31))
def test_split_into_equal_chunks_of_a_bucket_is_sound(sizes, seed):
    """R36b-5: ``flat.split(m)`` (``aten.split.Tensor``) is the list of pieces when every piece
    has ``m`` entries (also written through, and read after a whole-bucket write)."""
    rng = np.random.default_rng(seed)
    h, f = sizes
    xs = [_t(rng, f, h), _t(rng, h, f), _t(rng, f * h)]

    def fn(a, b, c):
        flat = torch.cat([a.reshape(-1), b.reshape(-1), c]) * 2.0
        pa, pb, pc = flat.split(a.numel())
        vb = pb.view_as(b)
        pc.add_(c)
        flat.div_(3.0)
        return pa.view_as(a), vb, pc, flat.chunk(3)[1].view_as(b)

    low = check_fn(fn, *xs)
    assert "aten.split.Tensor" in ops_of(low.gm)


def test_split_into_chunks_that_are_no_pieces_is_unknown():
    """``flat.split(m)`` when the pieces do not all have ``m`` entries: no pieces (UNKNOWN)."""
    rng = np.random.default_rng(0)
    a, b = _t(rng, 3, 4), _t(rng, 4, 3)

    def halves(a, b):
        flat = torch.cat([a.reshape(-1), b.reshape(-1)])
        return (flat.split(6)[1], flat.split(12)[1].view_as(b) * 1.0)

    outs = _outputs(halves, a, b)
    assert isinstance(outs[0], Opaque) and "not into its pieces" in outs[0].why, outs
    assert isinstance(outs[1], TV), outs


@settings(max_examples=6, deadline=None)
@given(sizes=st.lists(st.integers(2, 5), min_size=3, max_size=3), seed=st.integers(0, 2**31))
def test_zeroed_buffer_cut_into_pieces_is_sound(sizes, seed):
    """R36b-3 / R36b-4: ``buf = zeros(n)`` cut by its slices into consecutive pieces is a bucket
    of zeros: Megatron's ``main_grad`` views accumulate into it (``add_``), and views taken
    before a bucket is copied into all of it read that bucket's pieces."""
    rng = np.random.default_rng(seed)
    h, f, e = sizes
    xs = [_t(rng, f, h), _t(rng, e), _t(rng, h, e)]

    def fn(a, b, c):
        n = a.numel() + b.numel() + c.numel()
        buf = torch.zeros(n)
        ma = buf[: a.numel()].view_as(a)
        mb = buf[a.numel(): a.numel() + b.numel()]
        mc = buf[a.numel() + b.numel():].view_as(c)
        ma.add_(torch.tanh(a))
        mb.add_(b)
        ma.add_(a)                               # a second micro-batch
        buf.div_(2.0)
        out = torch.zeros(n)
        va = out[: a.numel()].view_as(a)
        vb = out[a.numel(): a.numel() + b.numel()].view_as(b)
        vc = out[a.numel() + b.numel():].view_as(c)
        out.copy_(torch.cat([a.reshape(-1), b, c.reshape(-1)]))
        out.mul_(3.0)
        return ma, mb, mc + c, va * a, vb * b, vc * c

    low = check_fn(fn, *xs)
    assert {"aten.zeros.default", "aten.add_.Tensor", "aten.copy_.default"} <= ops_of(low.gm)


def test_zeroed_buffers_that_are_no_pieces_stay_unknown():
    """Slices of a zeroed buffer that overlap, leave a gap or are one range are no pieces: a
    write through one leaves the buffer's readers unknown (or pass 1 refuses the slices)."""
    rng = np.random.default_rng(0)
    a, b = _t(rng, 3, 4), _t(rng, 5)

    def overlap(a, b):
        buf = torch.zeros(17)
        va, vb = buf[:12].view_as(a), buf[10:17]
        va.add_(a)
        return (vb * 1.0,)

    def one_piece(a, b):
        buf = torch.zeros(17)
        va = buf[:12].view_as(a)
        va.add_(a)
        return (buf[:12].view_as(a) * a,)

    for fn in (overlap, one_piece):
        try:
            outs = _outputs(fn, a, b)
        except AssertionError as e:      # pass 1: a slice that is no equal block
            assert "no dims" in str(e), e
            continue
        assert all(isinstance(o, Opaque) for o in outs), (fn.__name__, outs)
