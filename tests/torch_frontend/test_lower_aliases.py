"""The lowering's in-place rule on aliases it cannot read as relabellings (``lower.py``;
adversarial round 26): ``_reshape_alias`` with strides other than the row-major ones, and a
``copy_`` into a view, whose old value is needed to write the base; ``copy_`` into a tensor that
is no view overwrites all of it (a receive buffer: ``pp_merge``)."""

from __future__ import annotations

import numpy as np
import torch

from spec_lang.torch_frontend.lower import Opaque
from tests.torch_frontend.harness import check_fn, lower_fn

X = torch.tensor(np.random.default_rng(0).standard_normal((3, 5)))


def _outs(fn, *xs):
    return lower_fn(fn, *xs).outputs


def test_a_column_major_reshape_alias_is_not_a_relabelling():
    def f(x):
        r, c = x.shape
        return torch.ops.aten._reshape_alias(x.clone(), [r, c], [1, r]) * 2.0
    (out,) = _outs(f, X)
    assert isinstance(out, Opaque) and "not the row-major strides" in out.why, out


def test_a_row_major_reshape_alias_is_a_view():
    def f(x):
        return torch.ops.aten._reshape_alias(x.clone(), [15], [1]) * 2.0
    check_fn(f, X)


def test_a_copy_into_a_scrambled_alias_leaves_its_base_unknown():
    def f(x, y):
        b = x.clone()
        r, c = b.shape
        g = torch.ops.aten._reshape_alias(b, [r, c], [1, r])
        g.copy_(y)
        return (b * 1.0,)
    (out,) = _outs(f, X, X + 1.0)
    assert isinstance(out, Opaque), out


def test_a_copy_into_an_uninitialised_tensor_is_its_source():
    def f(x, y):
        e = torch.empty(x.shape, dtype=x.dtype)
        v = e.t()
        e.copy_(y)
        return e + x, v * 2.0
    check_fn(f, X, X + 1.0)


def test_a_traced_tensors_strides_survive_the_trip_between_processes():
    """The trace data a capture child hands over keeps every value's strides: the checks that
    read a layout (an all-reduce of a tensor that is not contiguous: round 27, R27-1;
    ``_reshape_alias``) saw every tensor contiguous when only the shape was kept."""
    from spec_lang.torch_frontend.tracedata import _meta_val, _val

    for t in (torch.empty(3, 4).t(), torch.empty_strided((3, 4), (8, 1)), torch.empty(2, 5)):
        back = _meta_val(_val(t))
        assert back.shape == t.shape and back.stride() == t.stride(), (t.stride(), back)
        assert back.is_contiguous() == t.is_contiguous()


def test_trace_data_that_names_a_callable_is_refused():
    """The capture child runs the plan file: bytes it hands over that would make pickle import
    and call something (here ``os.system``) are refused, never run."""
    import pickle

    import pytest

    from spec_lang.torch_frontend.tracedata import load_trace

    class Evil:
        def __reduce__(self):
            import os
            return (os.system, ("true",))

    with pytest.raises(pickle.UnpicklingError, match="os.system|posix.system"):
        load_trace(pickle.dumps({"consts": Evil()}))


def test_a_foreach_list_naming_one_tensor_twice_leaves_it_unknown():
    """R37b-3: ``_foreach_div_([g, g], 2)`` divides ``g`` twice in torch; the traced node
    computes both entries from ``g`` before the call, so each write-back would be one division:
    the storage is left unknown. Two distinct tensors are lowered as before."""
    def twice(x):
        g = x.clone()
        torch._foreach_div_([g, g], 2.0)
        return (g * 1.0,)

    def distinct(x, y):
        g, h = x.clone(), y.clone()
        torch._foreach_div_([g, h], 2.0)
        return (g * 1.0, h * 1.0)

    (out,) = _outs(twice, X)
    assert isinstance(out, Opaque) and "one storage twice" in out.why, out
    check_fn(distinct, X, X + 1.0)

    def crossed(x, y):
        g1, g2 = x.clone(), y.clone()
        torch._foreach_add_([g1, g2], [g2, g1])      # torch: g2 + (g1 + g2)
        return (g1 * 1.0, g2 * 1.0)

    outs = _outs(crossed, X, X + 1.0)
    assert all(isinstance(o, Opaque) for o in outs), outs

    def tensor_aliases_entry(x, y):
        s, g = x.sum().clone(), y.clone()   # the Tensor overload takes a 0-dim tensor
        torch._foreach_mul_([s, g], s)      # R38a-3 torch: g * (s * s)
        return (s * 1.0, g * 1.0)

    outs = _outs(tensor_aliases_entry, X, X + 1.0)
    assert all(isinstance(o, Opaque) and "twice" in o.why for o in outs), outs

    def tensor_of_its_own(x, y):
        s, g = x.clone(), y.clone()
        torch._foreach_mul_([s, g], y.sum())
        return (s * 1.0, g * 1.0)

    check_fn(tensor_of_its_own, X, X + 1.0)
