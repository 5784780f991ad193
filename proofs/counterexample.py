"""Counterexamples: the first diverging goal, where, which values, and the likely cause.

A refutation compares ``expected`` and ``actual`` of a goal evaluated in float64 on random
inputs at reduced sizes (:mod:`proofs.refute`). The counterexample names the goal, the spec
tensor, the plan's rank coordinates and site, a few values, and, when ``plan / spec`` is the
same number at every element, that ratio with a hint from the mesh: ``1/n`` or ``n`` for a mesh
axis of size ``n``, ``1/K`` or ``K`` for ``K`` micro-batches. For a plan with an explicit event
order (a pipeline schedule or an ``Accumulation``) it also names the stage holding the goal's
parameter, that stage's events and its exact gradient buffer (:func:`schedule_context`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from spec_lang.term import walk

__all__ = ["Counterexample", "explain_ratio", "goal_order", "constant_ratio",
           "schedule_context"]

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
    if len(hints) > 1:   # several axes (or K) of one size: the factor cannot tell them apart
        hints.append("(ambiguous: give the mesh axes and the micro-batch count distinct sizes, "
                     "e.g. dp=2, tp=4, to tell them apart)")
    return "; or ".join(hints[:-1]) + " " + hints[-1] if len(hints) > 1 else hints[0]


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
    schedule: dict[str, Any] | None = None           # see schedule_context
    # the domain-valid edge case applied to the draw (proofs/edges.py, proofs/replay.py)
    edge: dict[str, Any] | None = None
    nonfinite: str = ""   # "is NaN where the spec is finite" (issue 10), else ""

    @property
    def rank_text(self) -> str:
        return "(" + ",".join(f"{a}={r}" for a, r in self.rank.items()) + ")" if self.rank \
            else "(every rank)"

    @property
    def ratio_text(self) -> str:
        if self.nonfinite:
            return self.nonfinite
        if self.ratio is None:
            return "values differ (plan / spec is not a constant factor)"
        if self.hint.startswith("not a simple factor"):   # e.g. one scalar that merely differs
            return f"/ spec = {self.ratio:.3f} at this input, {self.hint}"
        return f"= {self.ratio:.3f} x spec: {self.hint}"

    def render(self) -> str:
        sizes = sizes_text(self.reduced_binding, set(self.index))
        lines = [
            f"first divergence: goal {self.goal}",
            f"  spec tensor: {self.tensor} ({self.kind})"
            + (f"   placement: {self.placement}" if self.placement else ""),
            f"  plan site:   {self.site}",
            f"  rank:        {self.rank_text}",
        ]
        if self.schedule is not None:
            sc = self.schedule
            where = (f"pp stage {sc['stage']}" + (f" chunk {sc['chunk']}" if sc["chunk"] else "")
                     if sc["pipeline"] else "the accumulation loop")
            lines += [f"  schedule:    {where} holds {sc['param']} ({sc['name']}); its events:",
                      f"    {sc['events']}",
                      f"    gradient buffer after them: {sc['buffer']}"]
            if sc["uneven"]:
                lines.append(f"    {sc['uneven']}")
        if self.edge is not None:
            lines.append(f"  input:       {self.edge.get('text', self.edge['kind'])}")
        lines.append(f"  values (float64, random inputs, seed {self.seed}; sizes {sizes}):")
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
            **({"schedule": dict(self.schedule)} if self.schedule is not None else {}),
            # what check-certificate re-evaluates (proofs/replay.py): every listed goal diverges
            "replay": {"goals": [self.goal, *self.others], "seed": self.seed,
                       "binding": dict(self.reduced_binding),
                       **({"edge": dict(self.edge)} if self.edge is not None else {})},
        }


def sizes_text(binding: dict[str, int], keep: set[str]) -> str:
    """``batch=2, ffn=48, seq=16, tp=2; at the same sizes: ffn_2, seq_c``: the sizes of a
    counterexample, a dim named ``<dim>_<suffix>`` with the size of ``<dim>`` (the torch front
    end's twins and copies of one user size) listed by name only unless ``keep`` (the dims of
    the values' index) names it (stop 54's new user: 21 sizes for a 7-entry ``SIZES``)."""
    shown, copies = [], []
    for k, v in sorted(binding.items()):
        base = next((b for b in binding if k.startswith(b + "_") and binding[b] == v), None)
        (copies if base is not None and k not in keep else shown).append(f"{k}={v}")
    more = f"; at the same sizes: {', '.join(c.split('=')[0] for c in copies)}" if copies else ""
    return ", ".join(shown) + more


def _num(x: float) -> str:
    # certificates hold no floats (the checker rejects them): values are decimal strings
    return repr(float(x))


def _buffer_text(terms: Any) -> str:
    """A buffer (``spec_lang.schedules.Buffer.terms``) as ``AR_avg[dp](g0) + g1``."""
    from spec_lang.schedules import chain_text

    parts = []
    for chain, coeffs in terms:
        inner = " + ".join(("" if x == 1 else f"{x}*") + f"g{m}"
                           for m, x in enumerate(coeffs) if x)
        for axis, op in chain:
            inner = chain_text(axis, op, inner)
        parts.append(inner)
    return " + ".join(parts) or "0"


def schedule_context(schedule: Any, goal: str, kind: str, rank: Mapping[str, int]
                     ) -> dict[str, Any] | None:
    """The gradient buffer behind ``goal`` for a plan with an explicit event order.

    ``schedule``: ``Plan.schedule``, a :class:`spec_lang.pipeline.Pipeline` or
    :class:`spec_lang.pipeline.Accumulation` (anything else: None). For a gradient, optimizer
    state or parameter goal of parameter ``p``: the stage holding ``p`` (the diverging rank's
    ``pp`` coordinate for a tied parameter), that stage's event order
    (``F0 F1 B0 AR_avg[dp] B1``, :meth:`spec_lang.schedules.Schedule.describe`), the exact
    buffer after it (:func:`spec_lang.schedules.buffer_after`, e.g. ``AR_avg[dp](g0) + g1``),
    and, when the micro-batches enter it unevenly (not one chain of collectives with equal
    coefficients), which hooks read which contributions and the plan line of the first hook
    (``hook_site``). Keys: pipeline, stage, chunk, param, name, events, buffer, uneven,
    hook_site.
    """
    if kind not in ("grad", "state", "param") or schedule is None:
        return None
    param = goal.split(":", 1)[1] if ":" in goal else goal
    from spec_lang.schedules import buffer_after

    if hasattr(schedule, "holders") and hasattr(schedule, "where"):      # Pipeline
        sch = schedule.schedule
        holders = [schedule.where(j) for j in schedule.holders(param)]
        if not holders:
            return None
        s, c = next(((s, c) for s, c in holders if s == rank.get(str(schedule.axis))),
                    holders[0])
        events, m, pipeline = sch.stages[s], sch.microbatches, True
        text = f"stage {s}: " + " ".join(map(str, events))
    elif hasattr(schedule, "events_of"):                                 # Accumulation
        events, m, s, c, pipeline = schedule.events_of(param), schedule.microbatches, 0, 0, False
        sch = schedule.schedule
        text = " ".join(map(str, events))
    else:
        return None
    buf = buffer_after(events, m, c)
    uneven, hook_site = "", None
    even = len(buf.terms) == 1 and len(set(buf.terms[0][1])) == 1
    if not even:
        hooks = [(i, e) for i, e in enumerate(events) if e.kind not in ("F", "B")]
        reads = []
        for i, e in hooks[:4]:
            before = buffer_after(events, m, c, upto=i)
            reads.append(f"{e} (event {i}) sees {_buffer_text(before.terms)}"
                         + (f" [{e.note}]" if e.note else ""))
        uneven = ("uneven: the micro-batches do not all pass the same reductions with equal weights; "
                  + "; ".join(reads)) if reads else \
            "uneven: the micro-batches do not enter the buffer with equal weights"
        hook_site = next((e.site for _, e in hooks if e.site), None)
    return {"pipeline": pipeline, "stage": s, "chunk": c, "param": param, "name": sch.name,
            "events": text, "buffer": _buffer_text(buf.terms), "uneven": uneven,
            "hook_site": hook_site}
