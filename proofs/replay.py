"""Replaying a refutation: the one procedure the refuter records and the checker re-runs.

A NOT EQUIVALENT certificate names the diverging goals, the (reduced) sizes and a seed. Both
sides of every named goal are evaluated with the trusted reference semantics
(:func:`spec_lang.evaluate.evaluate`) on inputs drawn by :func:`spec_lang.evaluate.sample_inputs`
from ``numpy.random.default_rng(seed)`` (the same generator then draws the ``PART`` addends),
the goals' terms taken in order ``[expected_1, actual_1, expected_2, ...]``, with an optional
domain-valid *edge case* applied to the draw (:func:`apply_edge`: a fully padded sequence, an
empty rank's or micro-batch's share of the batch, an expert no token selects). A goal diverges
when some element differs by more than the float64 tolerance of :func:`differs`, or is not
finite in the plan where the spec is (issue 10: a plan that is NaN where the spec is finite: a
division by an exact zero); where the spec is not finite there is no claim (round 17, R17-2).
A replay whose evaluation overflows float64 is inconclusive (it raises ``FloatingPointError``):
an overflow is not a value of the term over the reals; so is one with a plan value not finite
where the spec's is when the draw underflows anywhere (R18-2: an underflow's 0 / 0 is not a
division by an exact zero).

This module is part of the checker's trusted base: it imports only numpy and ``spec_lang``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from spec_lang.evaluate import EvaluationError, NamedArray, evaluate, sample_inputs
from spec_lang.term import Binding, TermError

__all__ = ["RTOL", "REPLAY_ERRORS", "EXCLUDE", "aligned", "differs", "replay", "apply_edge"]

RTOL = 1e-7
EXCLUDE = 1e6  # a selection score no top-k picks: the ``exclude`` edge case (an empty expert)
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
    """Elements where spec and plan differ: the plan not finite where the spec is (NaN or inf:
    a division by a count the domain allows to be 0, issue 10), or both finite and
    ``|de - da|`` above ``RTOL`` relative to the goal's magnitude (many orders of magnitude
    above float64 round-off at reduced sizes). An element where the spec is not finite is
    outside the spec's domain (over the reals it has no value there) and never differs,
    whatever the plan computes (adversarial round 17, F2: a plan dividing by ``max(n, 1)``
    where the spec divides by a token count ``n`` was refuted on a draw with ``n = 0``)."""
    fe, fa = np.isfinite(de), np.isfinite(da)
    ok = fe & fa
    scale = float(np.max(np.abs(de[ok]))) if ok.any() else 1.0
    tol = RTOL * max(scale, 1e-300) + 1e-12
    with np.errstate(invalid="ignore"):
        return (fe & ~fa) | (ok & (np.abs(de - da) > tol + RTOL * np.abs(de)))


def apply_edge(inputs: dict[str, np.ndarray], edge: Mapping[str, Any] | None,
               roots: Sequence[Any], binding: Binding) -> None:
    """Apply a domain-valid edge case to a draw of :func:`spec_lang.evaluate.sample_inputs`.

    ``edge``: ``{"kind": "zero-block", "input": m, "dim": d, "parts": n, "block": i}`` sets
    block ``i`` of ``n`` equal blocks along dim ``d`` of the ``mask`` input ``m`` to 0 (a fully
    padded sequence, rank share or micro-batch); the mask must keep a 1 (its domain: the batch
    has a token). ``{"kind": "exclude", "input": x, "dim": d, "index": i}`` sets index ``i``
    along ``d`` of the ``real`` input ``x`` to ``-EXCLUDE`` (a selection bias no top-k picks: an
    expert that receives no tokens). ``None``: no change.

    Raises:
        ValueError: an unknown kind, input or dim, a block or index out of range, or a result
            outside the input's declared domain.
    """
    if edge is None:
        return
    from spec_lang.term import Op, walk

    kind, name, dim = edge.get("kind"), edge.get("input"), edge.get("dim")
    node = next((t for t in walk(list(roots)) if t.op is Op.INPUT and t.attrs[0] == name), None)
    if node is None or name not in inputs:
        raise ValueError(f"edge case: no input {name!r} in the replayed goals")
    names = [d.name for d in node.dims]
    if dim not in names:
        raise ValueError(f"edge case: input {name!r} has no dim {dim!r}")
    x = np.moveaxis(inputs[name], names.index(dim), 0)   # a view: writes go to the input
    n = x.shape[0]
    if kind == "zero-block":
        parts, block = edge.get("parts"), edge.get("block")
        if node.attrs[2] != "mask" or not all(isinstance(v, int) and not isinstance(v, bool)
                                              for v in (parts, block)) \
                or not (2 <= parts <= n and n % parts == 0 and 0 <= block < parts):
            raise ValueError(f"edge case: zero-block needs a mask input and a block of a "
                             f"partition of {dim} (size {n}), got {dict(edge)}")
        x[block * (n // parts):(block + 1) * (n // parts)] = 0.0
        if not inputs[name].any():
            raise ValueError(f"edge case: {name!r} has no 1 left (outside the mask domain)")
    elif kind == "exclude":
        i = edge.get("index")
        if node.attrs[2] != "real" or not isinstance(i, int) or isinstance(i, bool) \
                or not 0 <= i < n:
            raise ValueError(f"edge case: exclude needs a real input and an index of {dim} "
                             f"(size {n}), got {dict(edge)}")
        x[i] = -EXCLUDE
    else:
        raise ValueError(f"edge case: unknown kind {kind!r}")


def replay(pairs: Sequence[tuple[Any, Any]], binding: Mapping[str, int] | Binding,
           seed: int, edge: Mapping[str, Any] | None = None
           ) -> list[tuple[tuple[str, ...], np.ndarray, np.ndarray]]:
    """Evaluate each ``(expected, actual)`` pair on one random draw (with the edge case
    ``edge`` applied, :func:`apply_edge`); aligned values per pair.

    Raises:
        EvaluationError, TermError, ValueError, FloatingPointError: a term cannot be evaluated,
            the evaluation overflows float64, or the edge case is not a domain-valid one.
    """
    b = binding if isinstance(binding, Binding) else Binding(dict(binding))
    rng = np.random.default_rng(seed)
    roots = [t for p in pairs for t in p]
    inputs = sample_inputs(roots, b, rng)
    apply_edge(inputs, edge, roots, b)
    # a float64 overflow makes the replay inconclusive (FloatingPointError): inf from a finite
    # value is not the real number the term denotes (adversarial finding 3: log-sum-exp without
    # the max shift, the exclude edge case's -1e6 overflowing exp)
    with np.errstate(divide="ignore", invalid="ignore", under="ignore", over="raise"):
        vals = evaluate(roots, b, inputs, rng=rng, keep="roots")
    out = [aligned(vals[e], vals[a]) for e, a in pairs]
    if any(np.any(np.isfinite(de) & ~np.isfinite(da)) for _, de, da in out):
        # a plan value not finite where the spec's is: a division by an exact zero (issue 10),
        # or an underflow's 0 / 0 (``exp(s - 1000)``), which is no value of the term over the
        # reals (adversarial R18-2): the same draw again, with underflow an error
        rng = np.random.default_rng(seed)
        inputs = sample_inputs(roots, b, rng)
        apply_edge(inputs, edge, roots, b)
        with np.errstate(divide="ignore", invalid="ignore", under="raise", over="raise"):
            evaluate(roots, b, inputs, rng=rng, keep="roots")
    return out
