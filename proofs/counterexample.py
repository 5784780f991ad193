"""Counterexamples: the first diverging goal, where, which values, and the likely cause.

A refutation compares ``expected`` and ``actual`` of a goal evaluated in float64 on random
inputs at reduced sizes (:mod:`proofs.refute`). The counterexample names the goal, the spec
tensor, the plan's rank coordinates and site, a few values, and, when ``plan / spec`` is the
same number at every element, that ratio with a hint from the mesh: ``1/n`` or ``n`` for a mesh
axis of size ``n``, ``1/K`` or ``K`` for ``K`` micro-batches.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from spec_lang.term import walk

__all__ = ["Counterexample", "explain_ratio", "goal_order", "constant_ratio"]

KIND_ORDER = {"loss": 0, "grad": 1, "state": 2, "param": 3}


def goal_order(goals: Any) -> Callable[[Any], tuple[int, int, str]]:
    """Dataflow order for choosing the *first* diverging goal: the loss, then gradients in the
    order the backward pass computes them, then optimizer state, then updated parameters.

    Within a kind, goals are ordered by the depth of their spec term (longest path from an
    input): the backward pass reaches the last layer's gradients first, at the smallest depth,
    and the embedding's last. The spec's depth is used, not the plan's: the plan may be the
    buggy one."""
    depth: dict[int, int] = {}
    for t in walk([g.expected for g in goals]):
        depth[id(t)] = 1 + max((depth[id(c)] for c in t.args), default=0)
    return lambda g: (KIND_ORDER.get(g.kind, 4), depth.get(id(g.expected), 0), g.name)


def constant_ratio(spec: np.ndarray, plan: np.ndarray, rtol: float = 1e-6) -> float | None:
    """``plan / spec`` if it is one number over every element with ``|spec|`` not tiny."""
    ok = np.isfinite(spec) & np.isfinite(plan)
    s, p = spec[ok], plan[ok]
    if s.size == 0:
        return None
    scale = float(np.max(np.abs(s))) or 1.0
    big = np.abs(s) > 1e-9 * scale
    if not big.any():
        return None
    r = p[big] / s[big]
    r0 = float(np.median(r))
    if not np.allclose(r, r0, rtol=rtol, atol=1e-9):
        return None
    # the elements where spec is ~0 must be ~0 in the plan too
    if not np.allclose(p[~big], r0 * s[~big], atol=1e-9 * scale):
        return None
    return r0


def _near(x: float, y: float) -> bool:
    return abs(x - y) <= 1e-6 * max(1.0, abs(y))


def explain_ratio(r: float, mesh: Mapping[str, int]) -> str:
    """A hint for ``plan = r x spec`` given the mesh (axis -> size; ``mb`` is the micro-batch
    count)."""
    if _near(r, 0.0):
        return "the plan's value is zero: a contribution is dropped"
    if _near(r, -1.0):
        return "the sign is flipped"
    hints: list[str] = []
    axes = {a: n for a, n in mesh.items() if n > 1}
    for a, n in axes.items():
        if a == "mb":
            if _near(r, 1 / n):
                hints.append(f"1/K for K={n} micro-batches: the accumulation over micro-batches "
                             f"is missing or averaged, or 1/K is applied twice")
            elif _near(r, n):
                hints.append(f"K={n} micro-batches: the 1/K loss scale is missing, or the "
                             f"accumulation is repeated")
        elif _near(r, 1 / n):
            hints.append(f"1/{n} = 1/|{a}|: a sum over {a} is missing or averaged")
        elif _near(r, n):
            hints.append(f"{n} = |{a}|: a sum over {a} is applied twice, or a 1/{a} scale "
                         f"is missing")
    if not hints:
        items = list(axes.items())
        for i, (a, n) in enumerate(items):
            for b, m in items[i + 1:]:
                if _near(r, 1 / (n * m)):
                    hints.append(f"1/{n * m} = 1/(|{a}|*|{b}|): sums over {a} and {b} are "
                                 f"missing or averaged")
                elif _near(r, n * m):
                    hints.append(f"{n * m} = |{a}|*|{b}|: 1/{a} and 1/{b} scales are missing "
                                 f"or sums applied twice")
    if not hints:
        frac = Fraction(r).limit_denominator(64)
        if not _near(float(frac), r):  # e.g. a scalar loss that is merely different
            return "not a simple factor: the values differ"
        return (f"a constant factor ({frac}) that no mesh axis or micro-batch count explains")
    return "; or ".join(hints)


@dataclass
class Counterexample:
    goal: str
    kind: str
    tensor: str
    placement: str
    site: str
    rank: dict[str, int]
    index: dict[str, int]
    values: list[tuple[str, float, float]]  # (element, spec, plan)
    ratio: float | None
    hint: str
    reduced_binding: dict[str, int]
    seed: int
    others: list[str] = field(default_factory=list)  # other diverging goals, in order
    notes: list[str] = field(default_factory=list)   # e.g. rng: two positions sharing a draw

    @property
    def rank_text(self) -> str:
        return "(" + ",".join(f"{a}={r}" for a, r in self.rank.items()) + ")" if self.rank \
            else "(every rank)"

    @property
    def ratio_text(self) -> str:
        if self.ratio is None:
            return "values differ (plan / spec is not a constant factor)"
        if self.hint.startswith("not a simple factor"):   # e.g. one scalar that merely differs
            return f"/ spec = {self.ratio:.3f} at this input, {self.hint}"
        return f"= {self.ratio:.3f} x spec: {self.hint}"

    def render(self) -> str:
        sizes = ", ".join(f"{k}={v}" for k, v in sorted(self.reduced_binding.items()))
        lines = [
            f"first divergence: goal {self.goal}",
            f"  spec tensor: {self.tensor} ({self.kind})"
            + (f"   placement: {self.placement}" if self.placement else ""),
            f"  plan site:   {self.site}",
            f"  rank:        {self.rank_text}",
            f"  values (float64, random inputs, seed {self.seed}; sizes {sizes}):",
        ]
        for el, s, p in self.values:
            lines.append(f"    {el:<24} spec {s: .6g}   plan {p: .6g}")
        lines.append(f"  plan {self.ratio_text}")
        if self.others:
            more = ", ".join(self.others[:5]) + (" ..." if len(self.others) > 5 else "")
            lines.append(f"  also diverging: {more}")
        lines.extend(f"  {n}" for n in self.notes)
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "goal": self.goal, "kind": self.kind, "tensor": self.tensor,
            "placement": self.placement, "site": self.site, "rank": dict(self.rank),
            "index": dict(self.index),
            "values": [{"element": e, "spec": _num(s), "plan": _num(p)} for e, s, p in self.values],
            "ratio": None if self.ratio is None else f"{self.ratio:.6g}",
            "explanation": self.ratio_text, "reduced_binding": dict(self.reduced_binding),
            "seed": self.seed, "also_diverging": list(self.others),
            **({"notes": list(self.notes)} if self.notes else {}),
            # what check-certificate re-evaluates (proofs/replay.py): every listed goal diverges
            "replay": {"goals": [self.goal, *self.others], "seed": self.seed,
                       "binding": dict(self.reduced_binding)},
        }


def _num(x: float) -> str:
    # certificates hold no floats (the checker rejects them): values are decimal strings
    return repr(float(x))
