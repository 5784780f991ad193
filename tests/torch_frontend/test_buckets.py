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
