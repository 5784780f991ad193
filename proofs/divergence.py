"""Where a refuted goal's divergence starts, in the user's files (a counterexample's note).

A NOT EQUIVALENT names the first diverging goal and the line that produces it, often the line
that calls ``loss.backward()`` or the gradient all-reduce, far from the line that is wrong (a
forward hook that scales an activation, a wrong norm, a detached input). This module follows
the divergence down from the goal to where it starts:

1. The two sides of the goal are paired node by node as :class:`proofs.first_difference.Matcher`
   pairs them (looking through communication, scale factors and micro-batch sums), breadth
   first from the goal, at most :data:`MAX_PAIRS` pairs.
2. Each pair ``(s, p)`` is compared on the counterexample's draw (its reduced sizes and seed):
   the spec's value ``s`` through the plan node's placement type (``E(s)``: one ``SHARD`` per
   mesh axis sharding a dim, as a cut's premise, :func:`proofs.cut._embed`) against the plan's
   ``p`` on every rank. A pair whose types do not correspond (other dim names) is not
   compared. A pair whose difference a layout explains agrees up to it: ``p`` is ``E(s)``
   times a product of mesh axis sizes (or its inverse), or is such a multiple once summed over
   one mesh axis (a ``Partial`` value: partial sums before their all-reduce, a local mean
   before a data-parallel average). Such values are everywhere in right plans.
3. From the goal (which differs), the walk descends into the pairs that differ or could not be
   compared, never into pairs that agree. A pair that differs while every compared pair below
   it agrees (up to layout) is where a divergence starts; of those, the earliest in dataflow
   (the smallest plan depth) is named: its plan node's ``file:line``, its operation in words,
   where the two structures part there, their operations (:meth:`Matcher.first`), and an
   input a layout explains, with its line and the layout ("it reads llama_model.py:90 (...):
   summed over tp it is the spec's value, a Partial value": an all-reduce that is missing).
   A start at the goal's own value adds nothing to the counterexample (``Start.at_goal``),
   and a goal whose value a layout explains (a missing average) has no start: the
   counterexample's factor says it.

It is for messages only: no verdict, proof or certificate check reads it, and it never raises
(any failure, or more than :data:`MAX_ELEMENTS` evaluated elements, gives ``None``).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from spec_lang.term import Binding, Term

__all__ = ["Start", "divergence_start", "MAX_PAIRS", "MAX_ELEMENTS"]

MAX_PAIRS = 2_000            # node pairs compared per counterexample
MAX_ELEMENTS = 50_000_000    # evaluated float64 elements (proofs.reduction.eval_cost)


@dataclass(frozen=True)
class Start:
    """Where a divergence starts.

    Attributes:
        plan_site: the plan node's ``file:line`` (``""`` when none is known).
        spec_site: the spec node's ``file:line`` (``""`` when none is known).
        plan_has: the plan node's operation in words ("a product of ..., the constant 3").
        how: how the two structures part there ("the spec has a tanh; the plan has a
            sigmoid"), else ``""``.
        unread: some of its inputs were not compared (more than :data:`MAX_PAIRS` pairs).
        reads: an input of it that differs from the spec's only as a layout explains, with its
            line ("model.py:12 (a product summed over H): summed over tp it is the spec's
            value, a Partial value"), else ``""``.
        compared: node pairs compared.
        at_goal: the start is the goal's own value (the counterexample's site says it all).
    """

    plan_site: str
    spec_site: str
    plan_has: str
    how: str
    reads: str
    compared: int
    at_goal: bool = False
    unread: bool = False    # some of its inputs were not compared (MAX_PAIRS: R54b-3)

    @property
    def note(self) -> str:
        """One line for the counterexample's notes."""
        how = f"; {self.how}" if self.how else ""
        rest = f"it reads {self.reads}" if self.reads else \
            f"not all it reads was compared (over {MAX_PAIRS} node pairs)" if self.unread else \
            "every value it reads agrees with the spec's"
        return f"values first differ at {self.plan_site} ({self.plan_has}){how}; {rest}"


def divergence_start(expected: Term, actual: Term, binding: Binding, seed: int,
                     edge: Any = None) -> Start | None:
    """Where the divergence of ``expected`` (spec) and ``actual`` (plan) starts, on the draw
    of ``seed`` at ``binding`` (the counterexample's reduced sizes) with its edge case applied
    (``edge``: :func:`proofs.replay.apply_edge`), or None (not found, not affordable, or any
    error: this is a message)."""
    try:
        return _start(expected, actual, binding, seed, edge)
    except Exception:  # noqa: BLE001 -- a message: never an error of prove
        return None


def _start(expected: Term, actual: Term, binding: Binding, seed: int, edge: Any
           ) -> Start | None:
    from proofs.cut import _embed
    from proofs.first_difference import Matcher, _near, _site, words
    from proofs.reduction import eval_cost
    from proofs.replay import aligned, apply_edge, differs
    from spec_lang.evaluate import evaluate, sample_inputs

    m = Matcher()
    pairs, below, through, cut = _pairs(m, expected, actual)
    embs = {k: _embed(s, p.dims, Fraction(1)) for k, (s, p) in enumerate(pairs)}
    roots = [expected, actual] + [p for _, p in pairs] + [e for e in embs.values() if e is not None]
    if eval_cost(roots, binding) > MAX_ELEMENTS:
        return None
    rng = np.random.default_rng(seed)
    inputs = sample_inputs(roots, binding, rng)
    apply_edge(inputs, edge, roots, binding)     # the counterexample's input (R54a-5)
    vals = evaluate(roots, binding, inputs, rng=rng, keep="all")
    _, de, da = aligned(vals[expected], vals[actual])
    if not differs(de, da).any():
        return None               # this draw does not show the divergence
    # the mesh axes the plan's values vary over, with their sizes
    sizes = {a[1:]: int(binding[a[1:]]) for v in vals.values() for a in v.axes
             if a.startswith("@") and a[1:] in binding}
    st: dict[int, bool | None] = {}   # differs (no layout explains it); None: not compared
    how: dict[int, str] = {}          # the layout that explains a difference
    for k, (_, p) in enumerate(pairs):
        e = embs[k]
        try:
            _, de, da = aligned(vals[e], vals[p]) if e is not None else (None, None, None)
        except ValueError:
            e = None
        st[k] = None if e is None else bool(differs(de, da).any())
        if st[k]:
            how[k] = _explained(vals[e], vals[p], sizes)
            st[k] = not how[k]    # a Partial or scaled value agrees up to its layout
    live = _differs_below(below, st)
    # descend from the goal into the pairs that differ or were not compared
    starts, seen, q = [], {0}, deque([0])
    while q:
        k = q.popleft()
        kids = [c for c in below.get(k, ()) if st[c] is not False]
        q.extend(c for c in kids if c not in seen)
        seen.update(kids)
        if st[k] and not any(live[c] for c in kids):
            starts.append(k)
    if not starts:
        return None
    depth = _depths([pairs[k][1] for k in starts])
    k = min(starts, key=lambda j: (depth[id(pairs[j][1])], j))   # the earliest in dataflow
    s, p = pairs[k]
    d = m.first(s, p)      # the two sides' structures part here: say how, as an UNKNOWN does
    parts = d.words if d is not None and d.spec_has != d.plan_has else ""
    odd = [c for c in below.get(k, ()) if how.get(c) and c not in through]   # an input a
    # layout explains (what a collective or a scale factor reads is not the node's input)
    reads = "" if not odd else \
        f"{_site(pairs[odd[0]][1]) or _near(pairs[odd[0]][1])} ({words(pairs[odd[0]][1])}): " \
        f"{how[odd[0]]}"
    return Start(_site(p) or _near(p), _site(s) or _near(s), words(p), parts, reads,
                 len(pairs), k == 0, k in cut)


def _differs_below(below: dict[int, list[int]], st: dict[int, bool | None]) -> dict[int, bool]:
    """Per pair: it, or a pair below it through pairs that differ or were not compared,
    differs (the pairs form a DAG; memoised, iterative)."""
    out: dict[int, bool] = {}
    for root in st:
        stack = [(root, False)]
        while stack:
            k, ready = stack.pop()
            if k in out:
                continue
            kids = [c for c in below.get(k, ()) if st[c] is not False]
            if not ready:
                stack.append((k, True))
                stack.extend((c, False) for c in kids if c not in out)
                continue
            out[k] = bool(st[k]) or any(out.get(c, False) for c in kids)
    return out


def _explained(ve: Any, vp: Any, sizes: dict[str, int]) -> str:
    """How the plan's value ``vp`` relates to the spec's ``ve`` (through the plan's placement)
    when a layout explains it: a product of mesh axis sizes (``sizes``: the plan's axes) or its
    inverse times the spec's, or, summed over one mesh axis, such a multiple (a ``Partial``);
    else ``""``."""
    from proofs.counterexample import constant_ratio
    from proofs.replay import aligned
    from spec_lang.evaluate import NamedArray

    ranks = [a for a in vp.axes if a.startswith("@")]
    axis_sizes = list(sizes.values())
    tries = [("", vp)] + [(a[1:], NamedArray(tuple(x for x in vp.axes if x != a),
                                              vp.data.sum(axis=vp.axes.index(a))))
                          for a in ranks]
    for axis, v in tries:
        try:
            _, de, da = aligned(ve, v)
        except ValueError:
            continue
        if not (np.isfinite(de).all() and np.isfinite(da).all()):
            return ""        # a NaN or inf is no layout's doing (R54a-5)
        r = constant_ratio(np.asarray(de), np.asarray(da))
        if r is None or not _mesh_monomial(abs(r), axis_sizes):   # a sign is a scale factor
            continue
        times = "" if abs(r - 1) <= 1e-9 else f"{Fraction(r).limit_denominator(4096)} x "
        if axis:
            return f"summed over {axis} it is {times}the spec's value, a Partial value"
        return f"it is {times}the spec's value"
    return ""


def _unsigned(m: Any, t: Term) -> Term:
    """``m.look(t)`` past negations too: a sign is a scale factor (``-sum(x)`` in the spec
    against ``sum(-x)`` in the plan: a cross-entropy under ``loss_parallel``)."""
    for _ in range(1_000_000):
        u = m.look(t)
        if u.op.name != "NEG":
            return u
        t = u.args[0]
    return t


def _mesh_monomial(r: float, axis_sizes: list[int]) -> bool:
    """``r`` is a product of some of ``axis_sizes``, or the inverse of such a product."""
    import itertools

    prods = {1}
    for n in range(1, len(axis_sizes) + 1):
        for c in itertools.combinations(axis_sizes, n):
            prods.add(int(np.prod(c)))
    return any(abs(r - x) <= 1e-9 * x or abs(r * x - 1) <= 1e-9 for x in prods)


def _pairs(m: Any, expected: Term, actual: Term
           ) -> tuple[list[tuple[Term, Term]], dict[int, list[int]], set[int], set[int]]:
    """Node pairs breadth first from the goal (index 0), each pair's pairs below it, the
    pairs reached by looking through a collective, a scale factor or a micro-batch sum (what
    such a node reads is not them), and the pairs whose inputs were not all paired."""
    from proofs.first_difference import _UNORDERED, _attr_key, _contracted

    pairs: list[tuple[Term, Term]] = [(expected, actual)]
    index = {(id(expected), id(actual)): 0}
    below: dict[int, list[int]] = {}
    through: set[int] = set()
    cut: set[int] = set()      # pairs some of whose inputs were not paired (MAX_PAIRS)
    q = deque([0])

    def add(k: int, s: Term, p: Term) -> int | None:
        key = (id(s), id(p))
        if key not in index:
            if len(pairs) >= MAX_PAIRS:
                cut.add(k)
                return None
            index[key] = len(pairs)
            pairs.append((s, p))
            q.append(index[key])
        below.setdefault(k, []).append(index[key])
        return index[key]

    while q:
        k = q.popleft()
        s, p = pairs[k]
        ls, lp = _unsigned(m, s), _unsigned(m, p)
        if ls is not s or lp is not p:
            j = add(k, ls, lp)
            if j is not None:
                through.add(j)
            continue
        if s.op is not p.op or _attr_key(s) != _attr_key(p) or \
                (s.op.name == "EINSUM" and _contracted(s) != _contracted(p)):
            continue              # the structures differ here: nothing to pair below
        a, b = m._operands(s), m._operands(p)
        if s.op in _UNORDERED:    # operands paired by signature (linear: R54a's last note)
            by_sig: dict[int, deque] = {}
            for y in b:
                by_sig.setdefault(m.sig(y), deque()).append(y)
            odd, same_pairs = [], []
            for x in a:
                same = by_sig.get(m.sig(x))
                if same:
                    same_pairs.append((x, same.popleft()))
                else:
                    odd.append(x)
            left = [y for q in by_sig.values() for y in q]
            if len(odd) == 1 and len(left) == 1:   # one operand differs: pair the two first
                add(k, odd[0], left[0])            # (before MAX_PAIRS is spent: R54b-3)
            for x, y in same_pairs:
                add(k, x, y)
        elif len(a) == len(b):
            for x, y in zip(a, b):
                add(k, x, y)
    return pairs, below, through, cut


def _depths(roots: list[Term]) -> dict[int, int]:
    """Longest path from an input, per node below ``roots``."""
    from spec_lang.term import walk

    depth: dict[int, int] = {}
    for t in walk(roots):
        depth[id(t)] = 1 + max((depth[id(c)] for c in t.args), default=0)
    return depth
