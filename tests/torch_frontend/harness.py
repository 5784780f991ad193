"""Lower a small single-device torch function and compare the IR with torch in float64.

``lower_fn(fn, *tensors)`` captures ``fn`` with ``make_fx`` (as the front end does), runs both
lowering passes with every input an ``INPUT`` term, and returns the output terms with the
binding. ``check_fn`` evaluates them with ``spec_lang.evaluate`` on the same values and compares
with ``fn`` run by torch in float64. Used by the rules' soundness tests (one per lowering rule).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from spec_lang.evaluate import evaluate
from spec_lang.term import Binding, Op, term
from spec_lang.torch_frontend import frontend as _frontend  # noqa: F401 -- registers rules
from spec_lang.torch_frontend.analysis import _EMPTY, analyse
from spec_lang.torch_frontend.dims import Dims
from spec_lang.torch_frontend.indexing import Idx, Pred
from spec_lang.torch_frontend.literals import Traces
from spec_lang.torch_frontend.lower import Lowering, Opaque, lower_graph
from spec_lang.torch_frontend.naming import spec_namer, spec_names
from spec_lang.torch_frontend.values import TV, Stacked

__all__ = ["Lowered1", "lower_fn", "check_fn", "ops_of"]


@pytest.fixture(autouse=True)
def float64_default():
    """Literals (``torch.tensor(0.5)``, ``ones``) in float64 for the tests of a module that
    imports this fixture (autouse there), and the default dtype restored after each."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)


@dataclass
class Lowered1:
    gm: Any
    outputs: list[Any]
    binding: Binding
    names: dict[str, np.ndarray]


def ops_of(gm: Any) -> set[str]:
    return {str(n.target) for n in gm.graph.nodes if n.op == "call_function"}


def lower_fn(fn: Callable[..., Any], *xs: torch.Tensor) -> Lowered1:
    """Capture and lower ``fn(*xs)`` (float tensors are real inputs, integer tensors indices,
    bool tensors masks)."""
    gm = make_fx(fn, tracing_mode="fake")(*xs)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]

    def seed(i: int, n: Any, d: Dims) -> list:
        lay = []
        for k, s in enumerate(n.meta["val"].shape):
            if s == 1:
                lay.append([])
                continue
            a = d.fresh(int(s), f"in{i} dim {k}")
            a.key = f"in{i}#{k}"
            lay.append([a])
        return lay

    an = analyse(gm, seed, Dims())
    # (an uninitialised buffer has no value; a case may copy into it)
    bad = {n: why for n, why in an.unsupported.items() if str(n.target) not in _EMPTY}
    if bad:
        n, why = next(iter(bad.items()))
        raise AssertionError(f"no dims for {n.target}: {why}")
    names = spec_names(an, {}, 1)
    namer = spec_namer(an, names)
    traces = Traces(gm, {}, {})
    traces.probe_sizes = dict(names.probe_size)
    traces.real_sizes = dict(names.probe_size)
    ctx = Lowering(an, namer, traces.scalar, traces.axis, None, traces=traces)
    ctx.copy_base = {names.name_of_key[k]: names.name_of_key[k[:-1]] for k in names.name_of_key
                     if k.endswith("'") and k[:-1] in names.name_of_key}
    values: list[Any] = []
    arrays: dict[str, np.ndarray] = {}
    for i, (ph, x) in enumerate(zip(placeholders, xs)):
        lay = ctx.layout(ph)
        flat = tuple(d for dim in lay for d in dim)
        name = f"in{i}"
        sizes = [names.probe_size[d.name] for d in flat]
        arrays[name] = x.detach().to(torch.float64).numpy().reshape(sizes) if flat else \
            x.detach().to(torch.float64).numpy().reshape(())
        if x.dtype == torch.bool:
            values.append(Pred(term(Op.INPUT, (), (name, "data", "mask"), flat), lay))
        elif not x.dtype.is_floating_point:
            rng = an.index_range.get(ph)
            if rng is None:
                raise AssertionError(f"integer input {i} is used as no index")
            values.append(Idx(term(Op.INPUT, (), (name, "data", "index", namer(rng).name), flat),
                              lay))
        else:
            values.append(TV(term(Op.INPUT, (), (name, "data", "real"), flat), lay))
    env = lower_graph(ctx, values)
    out_node = next(n for n in gm.graph.nodes if n.op == "output")
    outs = env[out_node]
    sizes = dict(names.probe_size)
    for nm in ctx.same_size:
        base = nm
        while base in ctx.same_size:
            base = ctx.same_size[base]
        sizes[nm] = names.probe_size[base]
    return Lowered1(gm, list(outs) if isinstance(outs, (list, tuple)) else [outs],
                    Binding(sizes), arrays)


def _to_torch_layout(v: Any, lay: Sequence[Sequence[Any]], binding: Binding,
                     shape: Sequence[int]) -> np.ndarray:
    names = [d.name for dim in lay for d in dim]
    data = v.transpose_to(tuple(names)) if names else v.data.reshape(())
    full = [binding[n] for n in names]
    data = np.broadcast_to(data, full) if names else data
    return np.asarray(data).reshape(tuple(shape))


def check_fn(fn: Callable[..., Any], *xs: torch.Tensor, atol: float = 1e-9) -> Lowered1:
    """Lower ``fn`` and assert its IR evaluates to torch's float64 result (``atol`` absolute,
    relative to the output's magnitude for large values)."""
    low = lower_fn(fn, *xs)
    want = fn(*[x.clone() for x in xs])
    want = list(want) if isinstance(want, (list, tuple)) else [want]
    flat_want: list[torch.Tensor] = []
    for w in want:
        flat_want.extend(w if isinstance(w, (list, tuple)) else [w])
    flat_got: list[Any] = []
    for g in low.outputs:
        flat_got.extend(g if isinstance(g, (list, tuple)) else [g])
    assert len(flat_got) == len(flat_want), (len(flat_got), len(flat_want))
    for g, w in zip(flat_got, flat_want):
        assert not isinstance(g, Opaque), g.reason()
        if isinstance(g, Stacked):
            raise AssertionError("a stack reached the output")
        t = g.term
        val = evaluate([t], low.binding, low.names, keep="roots")[t]
        got = _to_torch_layout(val, g.dims, low.binding, tuple(w.shape))
        ref = w.detach().to(torch.float64).numpy()
        scale = max(1.0, float(np.max(np.abs(ref)))) if ref.size else 1.0
        np.testing.assert_allclose(got, ref, rtol=0, atol=atol * scale)
    return low
