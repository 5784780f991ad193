"""Replaying a refutation: the one procedure the refuter records and the checker re-runs.

A NOT EQUIVALENT certificate names the diverging goals, the (reduced) sizes and a seed. Both
sides of every named goal are evaluated with the trusted reference semantics
(:func:`spec_lang.evaluate.evaluate`) on inputs drawn by :func:`spec_lang.evaluate.sample_inputs`
from ``numpy.random.default_rng(seed)`` (the same generator then draws the ``PART`` addends),
the goals' terms taken in order ``[expected_1, actual_1, expected_2, ...]``. A goal diverges
when some element differs by more than the float64 tolerance of :func:`differs`.

This module is part of the checker's trusted base: it imports only numpy and ``spec_lang``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from spec_lang.evaluate import EvaluationError, NamedArray, evaluate, sample_inputs
from spec_lang.term import Binding, TermError

__all__ = ["RTOL", "REPLAY_ERRORS", "aligned", "differs", "replay"]

RTOL = 1e-7
REPLAY_ERRORS = (EvaluationError, TermError, ValueError, FloatingPointError)


def aligned(e: NamedArray, a: NamedArray) -> tuple[tuple[str, ...], np.ndarray, np.ndarray]:
    """Both values broadcast to one axis order: rank axes (sorted) first, then dims."""
    ranks = sorted({x for v in (e, a) for x in v.axes if x.startswith("@")})
    dims: list[str] = []
    for v in (e, a):
        dims += [x for x in v.axes if not x.startswith("@") and x not in dims]
    axes = tuple(ranks) + tuple(dims)
    de, da = e.transpose_to(axes), a.transpose_to(axes)
    shape = np.broadcast_shapes(de.shape, da.shape)
    return axes, np.broadcast_to(de, shape), np.broadcast_to(da, shape)


def differs(de: np.ndarray, da: np.ndarray) -> np.ndarray:
    """Elements where spec and plan differ: both finite and ``|de - da|`` above ``RTOL`` relative
    to the goal's magnitude (many orders of magnitude above float64 round-off at reduced sizes)."""
    ok = np.isfinite(de) & np.isfinite(da)
    scale = float(np.max(np.abs(de[ok]))) if ok.any() else 1.0
    tol = RTOL * max(scale, 1e-300) + 1e-12
    return ok & (np.abs(de - da) > tol + RTOL * np.abs(de))


def replay(pairs: Sequence[tuple[Any, Any]], binding: Mapping[str, int] | Binding,
           seed: int) -> list[tuple[tuple[str, ...], np.ndarray, np.ndarray]]:
    """Evaluate each ``(expected, actual)`` pair on one random draw; aligned values per pair.

    Raises:
        EvaluationError, TermError, ValueError, FloatingPointError: a term cannot be evaluated.
    """
    b = binding if isinstance(binding, Binding) else Binding(dict(binding))
    rng = np.random.default_rng(seed)
    roots = [t for p in pairs for t in p]
    inputs = sample_inputs(roots, b, rng)
    vals = evaluate(roots, b, inputs, rng=rng, keep="roots")
    return [aligned(vals[e], vals[a]) for e, a in pairs]
