"""Helpers for spec_lang tests: build inputs inside a trace, evaluate, compare with torch."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from spec_lang.dims import Dim
from spec_lang.evaluate import NamedArray, evaluate
from spec_lang.problem import Problem
from spec_lang.spec import input_term
from spec_lang.tensor import Tensor, TraceContext, tracing
from spec_lang.term import Binding, Term


def inp(name: str, *dims: Dim, domain: str = "real", rng_dim: Dim | None = None,
        kind: str = "param") -> Tensor:
    """An INPUT tensor (call inside ``tracing``)."""
    return Tensor(input_term(name, kind, domain, dims, rng_dim), name=name)


def draw(shape: tuple[int, ...], domain: str, rng: np.random.Generator, hi: int = 0) -> np.ndarray:
    if domain == "real":
        return rng.standard_normal(shape)
    if domain == "positive":
        return rng.uniform(0.5, 2.0, shape)
    if domain == "mask":
        m = (rng.uniform(size=shape) < 0.6).astype(np.float64)
        m.reshape(-1)[0] = 1.0
        return m
    if domain == "index":
        return rng.integers(0, hi, size=shape).astype(np.float64)
    raise ValueError(domain)


def values(roots: list[Term], sizes: Mapping[str, int], inputs: Mapping[str, np.ndarray]
           ) -> dict[Term, NamedArray]:
    return evaluate(roots, Binding(dict(sizes)), inputs, rng=np.random.default_rng(1))


def as_array(v: NamedArray, dims: tuple[str, ...]) -> np.ndarray:
    return v.transpose_to(dims)


def traced(fn: Callable[[], object]) -> tuple[object, TraceContext]:
    ctx = TraceContext()
    with tracing(ctx):
        out = fn()
    return out, ctx


def goal_mismatches(pr: Problem, seed: int = 0, rtol: float = 1e-9) -> dict[str, float]:
    """Evaluate every goal of ``pr`` at its real sizes; name -> relative error where they differ."""
    from spec_lang.evaluate import sample_inputs  # noqa: PLC0415

    roots = [g.expected for g in pr.goals] + [g.actual for g in pr.goals]
    rng = np.random.default_rng(seed)
    inputs = sample_inputs(roots, pr.binding, rng)
    vals = evaluate(roots, pr.binding, inputs, rng=rng)
    bad = {}
    for g in pr.goals:
        e, a = vals[g.expected], vals[g.actual]
        axes = tuple(sorted(set(e.rank_axes) | set(a.rank_axes))) + g.expected.dim_names
        ea, aa = np.broadcast_arrays(e.transpose_to(axes), a.transpose_to(axes))
        err = float(np.max(np.abs(ea - aa))) / max(1.0, float(np.max(np.abs(ea))))
        if not err <= rtol:
            bad[g.name] = err
    return bad
