"""The micro-batch fold of a pipelined plan (``spec_lang/torch_frontend/pp_fold.py``): a sum of
one term per micro-batch that line up under ``phi_i`` becomes ``ALL_REDUCE(G, mb)``, checked
equal in float64 to the sum it replaces; sums that do not line up (a micro-batch counted twice,
one missing, one computed differently, micro-batches swapped inside a summand) are left
alone, so they can never be proved as if they did.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from rewriting import build as b
from spec_lang.evaluate import evaluate
from spec_lang.term import Binding, Op, walk
from spec_lang.torch_frontend.pp_fold import MB, fold_microbatches


def _xy():
    return b.inp("x", ["B", "H"], "data"), b.inp("y", ["B", "H"], "data")


def _g(i: int, n: int, swap: bool = False, scale: int = 1):  # noqa: FBT001
    """Micro-batch ``i``'s contribution: sum over its rows of x * y (a weight gradient)."""
    x, y = _xy()
    cx = b.chunk(x, "B", n, i)
    if swap:     # reads micro-batch i of x and micro-batch i + 1 of y
        cy = b.chunk(y, "B", n, (i + 1) % n)
        g = b.mul(b.einsum([cx], ["H"]), b.einsum([cy], ["H"]))
    else:
        g = b.einsum([cx, b.chunk(y, "B", n, i)], ["H"])
    return b.mul(b.const(scale), g) if scale != 1 else g


def _value(t, n: int) -> np.ndarray:
    rng = np.random.default_rng(7)
    bnd = Binding({"B": 4 * n, "H": 3, MB: n})
    ins = {"x": rng.standard_normal((4 * n, 3)), "y": rng.standard_normal((4 * n, 3))}
    return evaluate([t], bnd, ins, keep="roots")[t].data


def _folded(t, n: int):
    return fold_microbatches({"g": t}, n, {"B"})["g"]


@pytest.mark.parametrize("n", [2, 4])
def test_a_sum_over_every_micro_batch_is_an_all_reduce_over_mb_and_equal(n):
    t = _g(0, n)
    for i in range(1, n):           # the gradient buffer's running adds
        t = b.add(t, _g(i, n))
    f = _folded(t, n)
    assert f.op is Op.ALL_REDUCE and f.attrs == (MB, "sum")
    assert not any(x.op is Op.CHUNK for x in walk(f))
    x, y = _xy()
    np.testing.assert_allclose(_value(f, n), _value(t, n), rtol=1e-12)
    np.testing.assert_allclose(_value(f, n), _value(b.einsum([x, y], ["H"]), n), rtol=1e-12)


def test_a_scaled_mean_of_micro_batches_folds_inside():
    t = b.mul(b.const(Fraction(1, 2)), b.add(_g(0, 2), _g(1, 2)))
    f = _folded(t, 2)
    assert any(x.op is Op.ALL_REDUCE for x in walk(f))
    np.testing.assert_allclose(_value(f, 2), _value(t, 2), rtol=1e-12)


@pytest.mark.parametrize("what,t,n", [
    ("micro-batch 0 counted twice", lambda: b.add(_g(0, 2), _g(0, 2)), 2),
    ("one micro-batch missing", lambda: b.add(b.add(_g(0, 4), _g(1, 4)), _g(2, 4)), 4),
    ("one computed differently", lambda: b.add(_g(0, 2), _g(1, 2, scale=2)), 2),
    ("micro-batches swapped inside a summand",
     lambda: b.add(_g(0, 2, swap=True), _g(1, 2, swap=True)), 2),
])
def test_sums_that_do_not_line_up_are_not_folded(what, t, n):
    t = t()
    f = _folded(t, n)
    assert not any(x.op is Op.ALL_REDUCE for x in walk(f)), what
    np.testing.assert_allclose(_value(f, n), _value(t, n), rtol=1e-12)


def test_other_dims_cut_in_the_same_number_of_blocks_are_not_micro_batches():
    # rotary halves: a block of H, not of the batch dim the schedule cut
    x, y = _xy()
    t = b.add(b.einsum([b.chunk(x, "H", 2, 0)], []), b.einsum([b.chunk(x, "H", 2, 1)], []))
    assert _folded(t, 2) is t
