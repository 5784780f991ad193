"""Helpers shared by the rewriting tests (draw adapters, array alignment)."""

from __future__ import annotations

import numpy as np


class HypothesisDraw:
    """Adapts hypothesis' ``data.draw`` to :class:`rewriting.rule.Draw`."""

    def __init__(self, data):
        from hypothesis import strategies as st

        self._data, self._st = data, st

    def int(self, lo: int, hi: int) -> int:
        return self._data.draw(self._st.integers(lo, hi))

    def choice(self, xs):
        return self._data.draw(self._st.sampled_from(list(xs)))

    def bool(self) -> bool:
        return self._data.draw(self._st.booleans())


class RandomDraw:
    """A seeded :class:`rewriting.rule.Draw` for non-hypothesis tests."""

    def __init__(self, seed: int):
        self._rng = np.random.default_rng(seed)

    def int(self, lo: int, hi: int) -> int:
        return int(self._rng.integers(lo, hi + 1))

    def choice(self, xs):
        xs = list(xs)
        return xs[int(self._rng.integers(0, len(xs)))]

    def bool(self) -> bool:
        return bool(self._rng.integers(0, 2))


def aligned(a, b):
    """Two NamedArrays broadcast to the union of their axes (same order)."""
    axes = tuple(sorted(set(a.axes) | set(b.axes)))
    x, y = a.transpose_to(axes), b.transpose_to(axes)
    shape = np.broadcast_shapes(x.shape, y.shape)
    return np.broadcast_to(x, shape), np.broadcast_to(y, shape)
