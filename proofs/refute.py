"""Refutation: evaluate every goal's two sides in float64 at reduced sizes and compare.

One evaluation covers every rank (the evaluator vectorises over rank axes) and every goal
(shared subterms are evaluated once). A mismatch is a definite bug over the reals, up to the
float64 tolerance used here (``rtol`` 1e-7 relative to the goal's magnitude), which is many
orders of magnitude above float64 round-off at these sizes and below any real scaling error;
a value that is finite on one side only is a mismatch too. Goals whose plan side divides by
something the input domains do not show nonzero are also evaluated on domain-valid edge cases
(:mod:`proofs.edges`: a fully padded sequence, an empty rank share or micro-batch, an empty
expert); an edge draw on which the spec itself is not finite is outside the spec's domain
and skipped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from proofs.counterexample import Counterexample, constant_ratio, explain_ratio, goal_order
from proofs.edges import edge_cases, needs_edges
from proofs.replay import (
    REPLAY_ERRORS, RTOL, aligned as _aligned, apply_edge, differs as _differs, replay,
)
from spec_lang.evaluate import EvaluationError, evaluate, sample_inputs
from spec_lang.term import Binding, Op, Term, TermError, term, walk

__all__ = ["Refutation", "refute", "RTOL", "refute_reduced_mesh", "asymmetry_note",
           "real_mesh_factor"]

SECOND_SEED_MAX_S = 5.0
REPLAY_SEEDS = 4  # fresh draws tried for the certificate's replay


@dataclass
class Refutation:
    mismatched: list[Any]  # goals, in dataflow order
    counterexample: Counterexample | None
    skipped: dict[str, str]  # goal name -> why it could not be evaluated


def refute(goals: Sequence[Any], reduced: Binding, mesh: Mapping[str, int], *,
           seeds: Sequence[int] = (0, 1)) -> Refutation:
    """Evaluate every goal at ``reduced`` sizes on random inputs, one pass per seed.

    Returns the diverging goals in dataflow order (:func:`goal_order`) and a counterexample
    for the first one; goals that cannot be evaluated are listed in ``skipped`` (never refuted).
    """
    skipped: dict[str, str] = {}
    bad: dict[str, tuple[Any, int, tuple[str, ...], np.ndarray, np.ndarray]] = {}
    t0 = time.monotonic()
    for k, seed in enumerate(seeds):
        if k and (bad or time.monotonic() - t0 > SECOND_SEED_MAX_S):
            break  # a second draw only when the first was cheap (one draw almost never misses)
        rng = np.random.default_rng(seed)
        roots = [t for g in goals for t in (g.expected, g.actual)]
        try:
            inputs = sample_inputs(roots, reduced, rng)
            vals = evaluate(roots, reduced, inputs, rng=rng, keep="roots")
        except (EvaluationError, TermError, ValueError, FloatingPointError) as e:
            # evaluate goal by goal to isolate the ones without numeric semantics
            vals = {}
            inputs = {}
            for g in goals:
                try:
                    inputs.update(sample_inputs([g.expected, g.actual], reduced, rng))
                    vals.update(evaluate([g.expected, g.actual], reduced, inputs, rng=rng))
                except (EvaluationError, TermError, ValueError, FloatingPointError) as e2:
                    skipped[g.name] = f"cannot evaluate: {e2}"
            if not vals:
                skipped.setdefault("*", f"cannot evaluate: {e}")
        for g in goals:
            if g.name in bad or g.expected not in vals or g.actual not in vals:
                continue
            try:
                axes, de, da = _aligned(vals[g.expected], vals[g.actual])
            except ValueError as e:
                skipped[g.name] = f"values have incompatible shapes: {e}"
                continue
            if _differs(de, da).any():
                bad[g.name] = (g, seed, axes, np.array(de), np.array(da))
    edge: dict[str, Any] | None = None
    first = min((v[0] for v in bad.values()), key=goal_order(goals), default=None)
    if first is None or _nonfinite_only_in_plan(bad[first.name][3], bad[first.name][4]):
        # no divergence, or a NaN plan value on a random draw: an edge case says which input
        # makes it (a fully padded sequence, an empty expert) and is what the replay records
        found: dict[str, Any] = {}
        edge = _edge_search(goals, reduced, seeds[0], found)
        if edge is not None and (first is None or first.name in found):
            bad = found
        else:
            edge = None
    order = sorted((v[0] for v in bad.values()), key=goal_order(goals))
    if not order:
        return Refutation([], None, skipped)
    # The certificate records a replay (proofs/replay.py): the diverging goals alone on a draw
    # from one seed. Only goals that diverge in that replay are refuted, and the counterexample
    # shows the replay's values, so the checker re-derives exactly what is reported.
    first_seed = bad[order[0].name][1]
    for seed in dict.fromkeys((first_seed, *range(REPLAY_SEEDS))):
        for cand in (order, order[:1]):
            try:
                vals = replay([(g.expected, g.actual) for g in cand], reduced, seed, edge)
            except REPLAY_ERRORS:
                continue
            kept = [(g, v) for g, v in zip(cand, vals) if _differs(v[1], v[2]).any()]
            if kept:
                g, (axes, de, da) = kept[0]
                cx = _counterexample(g, seed, axes, np.array(de), np.array(da), reduced, mesh,
                                     [x.name for x, _ in kept[1:]])
                cx.edge = edge
                return Refutation([x for x, _ in kept], cx, skipped)
    for g in order:  # a divergence no replay reproduces is not reported as a refutation
        skipped.setdefault(g.name, "values differed on one random draw but not on a replay")
    return Refutation([], None, skipped)


def _nonfinite_only_in_plan(de: np.ndarray, da: np.ndarray) -> bool:
    """Some element is finite in the spec and not in the plan."""
    return bool((np.isfinite(de) & ~np.isfinite(da)).any())


def _edge_search(goals: Sequence[Any], reduced: Binding, seed: int,
                 bad: dict[str, Any]) -> dict[str, Any] | None:
    """Evaluate the goals whose plan side may divide by 0 on each edge case (``proofs.edges``);
    the first edge case on which some goal diverges (its spec finite) is returned, the goals
    recorded in ``bad``."""
    todo = [g for g, need in zip(goals, needs_edges([g.actual for g in goals])) if need]
    if not todo:
        return None
    roots = [t for g in todo for t in (g.expected, g.actual)]
    for edge in edge_cases(roots, reduced):
        rng = np.random.default_rng(seed)
        try:
            inputs = sample_inputs(roots, reduced, rng)
            apply_edge(inputs, edge, roots, reduced)
            vals = evaluate(roots, reduced, inputs, rng=rng, keep="roots")
        except (EvaluationError, TermError, ValueError, FloatingPointError):
            continue
        for g in todo:
            try:
                axes, de, da = _aligned(vals[g.expected], vals[g.actual])
            except ValueError:
                continue
            # a spec value that is not finite: the edge case is outside the spec's domain
            if np.isfinite(de).all() and _differs(de, da).any():
                bad[g.name] = (g, seed, axes, np.array(de), np.array(da))
        if bad:
            return edge
    return None


def _counterexample(g: Any, seed: int, axes: tuple[str, ...], de: np.ndarray, da: np.ndarray,
                    reduced: Binding, mesh: Mapping[str, int], others: list[str]) -> Counterexample:
    diff = _differs(de, da)
    first = tuple(int(i) for i in np.argwhere(diff)[0])
    rank = {a[1:]: first[k] for k, a in enumerate(axes) if a.startswith("@")}
    nr = len(rank)
    # values at that rank: the first few elements that differ
    at = tuple(first[:nr])
    dsub, asub, msub = de[at], da[at], diff[at]
    dim_axes = axes[nr:]
    values = []
    for idx in np.argwhere(msub)[:4] if msub.ndim else [()]:
        idx = tuple(int(i) for i in idx)
        el = "[" + ",".join(f"{d}={i}" for d, i in zip(dim_axes, idx)) + "]" if idx else "(scalar)"
        values.append((el, float(dsub[idx]), float(asub[idx])))
    ratio = constant_ratio(de, da)
    if ratio is None and np.asarray(dsub).size >= 2:  # constant at the first diverging rank
        ratio = constant_ratio(np.asarray(dsub), np.asarray(asub))
    hint = explain_ratio(ratio, mesh) if ratio is not None else ""
    tensor = g.name.split(":", 1)[1] if ":" in g.name else g.name
    if g.kind == "state" and ":" in g.name:     # exp_avg:w, step:w, buffer:running_mean
        key, owner = g.name.split(":", 1)
        tensor = owner if key == "buffer" else f"{key} of {owner}"
        if key == "step" and ratio is not None:  # a counter: no mesh axis explains its factor
            hint = ("the optimizer's step counter leaves the step at a different count (it "
                    "advances once per optimizer step; Adam's bias correction reads it)")
    cx = Counterexample(
        goal=g.name, kind=g.kind, tensor=tensor, placement=getattr(g, "placement", "") or "",
        site=getattr(g, "site", "") or "<unknown>:0", rank=rank,
        index={d: first[nr + k] for k, d in enumerate(dim_axes)}, values=values, ratio=ratio,
        hint=hint, reduced_binding={k: int(v) for k, v in reduced.items()}, seed=seed,
        others=others)
    x, y = float(de[tuple(first)]), float(da[tuple(first)])
    if np.isfinite(x) and not np.isfinite(y):   # issue 10: NaN / inf in the plan only
        what = (lambda v: "NaN" if np.isnan(v) else "inf" if v > 0 else "-inf")
        cx.nonfinite = f"is {what(y)} where the spec is finite"
    return cx


@dataclass(frozen=True)
class _OnReducedMesh:
    """A goal (or lemma obligation) with its two sides rewritten for a reduced mesh."""

    name: str
    kind: str
    expected: Any
    actual: Any
    site: str = ""
    placement: str = ""
    layer: str | None = None


def refute_reduced_mesh(goals: Sequence[Any], binding: Binding, *, seeds: Sequence[int] = (0, 1),
                        mr: Any = None) -> tuple[Refutation | None, Any]:
    """Search for a divergence with every generic mesh axis cut to a few coordinates.

    ``binding`` holds the *real* sizes (dims and mesh). Returns ``(refutation, reduction)``;
    the refutation is ``None`` when no axis could be cut (search at the real mesh instead).
    A divergence found here is evidence for where to look, never a verdict: it must be
    confirmed by :func:`refute` at the real mesh sizes (``docs/rank-symmetry.md``); the
    refutation's goals are stand-ins carrying the original names.
    """
    from proofs.reduction import reduce_mesh

    if mr is None:
        mr = reduce_mesh([t for g in goals for t in (g.expected, g.actual)], binding)
    if not mr.reduced:
        return None, mr
    red = [_OnReducedMesh(g.name, g.kind, mr.roots[2 * i], mr.roots[2 * i + 1],
                          getattr(g, "site", "") or "", getattr(g, "placement", "") or "",
                          getattr(g, "layer", None)) for i, g in enumerate(goals)]
    return refute(red, mr.binding, mr.mesh, seeds=seeds), mr


def _uniform(values: tuple[Any, ...]) -> tuple[Any, tuple[int, ...]]:
    """The value most ranks hold (ties: the lowest coordinate's) and the other coordinates."""
    from collections import Counter

    c = Counter(values)
    top = max(c.values())
    maj = next(v for v in values if c[v] == top)
    return maj, tuple(i for i, v in enumerate(values) if v != maj)


def asymmetry_note(expected: Any, actual: Any, binding: Binding, seed: int) -> str | None:
    """Which per-rank constants make a diverging goal diverge.

    For each mesh axis with ``RANK_CONST`` s whose values are not all equal, the plan side is re-evaluated with each of them set to the value most
    ranks hold. If the goal then matches, the ranks holding another value are named: they break
    the symmetry (a different epsilon on dp rank 63). Diagnostic only (not in the replay).
    """
    nodes = [t for t in walk(actual) if t.op is Op.RANK_CONST and len(set(t.attrs[1])) > 1]
    axes = sorted({t.attrs[0] for t in nodes})
    for a in axes:
        sub: dict[int, Term] = {}
        odd: set[int] = set()
        vals = []
        for t in nodes:
            if t.attrs[0] != a:
                continue
            maj, o = _uniform(tuple(t.attrs[1]))
            odd.update(o)
            vals.append((maj, {i: t.attrs[1][i] for i in o}))
            sub[id(t)] = term(Op.RANK_CONST, (), (a, (maj,) * len(t.attrs[1])), ())
        if not odd or len(odd) > 4:
            continue
        new: dict[int, Term] = {}
        for t in walk(actual):
            if id(t) in sub:
                new[id(t)] = sub[id(t)]
                continue
            args = tuple(new[id(c)] for c in t.args)
            new[id(t)] = t if all(x is y for x, y in zip(args, t.args)) else \
                term(t.op, args, t.attrs, t.dims)
        try:
            (_, de, da), = replay([(expected, new[id(actual)])], binding, seed)
        except REPLAY_ERRORS:
            continue
        if _differs(np.asarray(de), np.asarray(da)).any():
            continue
        ranks = ", ".join(f"{a}={i}" for i in sorted(odd))
        what = "; ".join(
            ", ".join(f"{v} on {a}={i}" for i, v in o.items()) + f" (else {maj})"
            for maj, o in vals if o)
        return (f"asymmetric ranks: {ranks} hold other per-rank constants (RANK_CONST over {a}: "
                f"{what}); with the value of the other ranks on every {a} rank the goal matches")
    return None


def real_mesh_factor(goal: Any, binding: Binding, *, seed: int = 0) -> Any:
    """``plan / spec`` of ``goal`` at the real mesh sizes, inferred from reduced meshes.

    The ratio is evaluated on the reduced mesh of :func:`proofs.reduction.reduce_mesh` and, for
    each cut axis, on a mesh where only that axis has its next larger divisor; when the ratio
    is a monomial ``r0 * prod(size_a ** e_a)`` with integer ``e_a`` (the usual ``1/dp``,
    ``K``, ``1/(dp K)`` factors), the real ratio is ``r0 * prod((n_a / k_a) ** e_a)``.
    Returns an exact ``Fraction`` or ``None`` (not a constant, not a monomial, or nothing to
    cut: then evaluate at the real sizes). A search aid: the caller must prove the factor.
    """
    from fractions import Fraction

    from proofs.reduction import reduce_mesh

    roots = [goal.expected, goal.actual]

    def ratio(mr: Any) -> float | None:
        try:
            (_, de, da), = replay([(mr.roots[0], mr.roots[1])], mr.binding, seed)
        except REPLAY_ERRORS:
            return None
        return constant_ratio(np.asarray(de), np.asarray(da))

    base = reduce_mesh(roots, binding)
    if not base.reduced:
        return None
    r0 = ratio(base)
    if r0 is None or r0 == 0:
        return None
    out = Fraction(r0).limit_denominator(1 << 20)
    for a, k in base.mesh.items():
        if a not in base.reps:
            continue
        n = int(binding[a])
        other = reduce_mesh(roots, binding, at_least={a: k + 1})
        k2 = other.mesh.get(a, n)
        if k2 == k:
            return None
        r2 = ratio(other)
        if r2 is None or r2 == 0 or (r2 > 0) != (r0 > 0):
            return None
        e = np.log(r2 / r0) / np.log(k2 / k)
        if abs(e - round(e)) > 1e-6:
            return None
        out *= Fraction(n, k) ** int(round(e))
    return out
