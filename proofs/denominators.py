"""The spec's denominators: which ones the input domains settle, which the verdict assumes.

Issue 10, family 3 and deliverable 4. The spec is defined only where its own denominators are
nonzero (radicands non-negative, ``LOG`` arguments positive). For each argument ``d`` of a
partial op (``RECIP``, a negative or fractional ``POW``, ``RSQRT``, ``SQRT``, ``LOG``) in the
spec's terms this module decides, with :mod:`rewriting.signs`:

* *settled by arithmetic*: the input domains and the op's argument make it fit (``x^2 + eps``,
  a sum of ``exp``, a positive optimizer state): no assumption;
* *settled by a declaration*: it fits only because a ``mask`` input has a 1 (the batch has a
  token: ``N = sum(mask) > 0``); the verdict lists it, naming the mask;
* *assumed*: neither (the spec divides by a ``real`` input, by a count the domains allow to be
  0, ...); the verdict lists it as an assumption and the prover may cancel a plan denominator
  whose normal form is its normal form (``rewriting.signs.Signs(assumed=...)``). The
  certificate records each with the proof of ``d == nf(d)`` (``docs/certificate.md``,
  ``denominators``), which the checker verifies (``proofs/checker_signs.py``).

Never an assumption: a denominator that only the *plan* has (a per-sequence, per-rank or
per-micro-batch token count). Those must be shown nonzero or they are not cancelled.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from rewriting.signs import ANY, NONNEG, NONZERO, POS, Signs, assumed_closure, iter_partial
from spec_lang.term import Op, Term, walk

__all__ = ["SpecDenominators", "spec_denominators", "describe", "assumed_facts",
           "assumed_signs", "certificate_entries", "REQUIREMENT_NAMES"]

REQUIREMENT_NAMES = {NONZERO: "nonzero", POS: "positive", NONNEG: "nonnegative"}
_REL = {NONZERO: "!= 0", POS: "> 0", NONNEG: ">= 0"}
MAX_LISTED = 8


@dataclass
class SpecDenominators:
    """The spec's denominators by how they are known to fit (module docstring)."""

    assumed: list[tuple[Term, int]] = field(default_factory=list)    # (argument, requirement)
    declared: list[tuple[Term, str]] = field(default_factory=list)   # (argument, mask name)
    masks: list[str] = field(default_factory=list)                   # the spec's mask inputs

    def assumption_lines(self) -> list[str]:
        """The verdict's assumptions about denominators (replacing the old blanket sentence):
        the mask domain as declared, and the spec denominators assumed."""
        out = []
        if self.masks:
            shown = ", ".join(dict.fromkeys(describe(d) for d, _ in self.declared))
            out.append(f"the mask domain: {', '.join(self.masks)} has a 1 (the batch has a "
                       f"token)" + (f", so the spec's denominators {_cap(shown)} are > 0"
                                    if shown else ""))
        if self.assumed:
            items = [f"{describe(d)} {_REL[r]}" for d, r in self.assumed]
            more = f" (and {len(items) - MAX_LISTED} more)" if len(items) > MAX_LISTED else ""
            out.append("spec denominators assumed (the spec is defined only where they are): "
                       + "; ".join(items[:MAX_LISTED]) + more)
        return out


def spec_denominators(spec_roots: Sequence[Term]) -> SpecDenominators:
    """Classify the arguments of the partial ops in the spec's terms (module docstring).

    ``spec_roots``: the goals' expected terms (the spec through the output placements; no
    ``cut:`` variables)."""
    full, arith = Signs(), Signs(mask_total=False)
    need: dict[Term, int] = {}
    for _, d, r in iter_partial(spec_roots):
        need[d] = need.get(d, ANY) & r
    out = SpecDenominators(masks=sorted({str(t.attrs[0]) for t in walk(list(spec_roots))
                                         if t.op is Op.INPUT and t.attrs[2] == "mask"}))
    for d, r in need.items():
        if not full.sign(d) & ~r and full.defined(d):
            if arith.sign(d) & ~r:   # its own sign rests on the mask's declaration
                out.declared.append((d, _mask_of(d)))
            continue
        if not full.sign(d) & ~r:
            continue   # fits; only its own inner denominators are assumed (listed on their own)
        out.assumed.append((d, r))
    return out


def assumed_facts(entries: Sequence[tuple[Term, Term, int]]) -> dict[Term, int]:
    """``{term: allowed}`` from ``(spec argument, its normal form, requirement)`` entries."""
    return assumed_closure([(t, r) for d, n, r in entries for t in (d, n)])


def _mask_of(t: Term) -> str:
    for x in walk([t]):
        if x.op is Op.INPUT and x.attrs[2] == "mask":
            return str(x.attrs[0])
    return "a mask"


def _cap(s: str, n: int = 160) -> str:
    return s if len(s) <= n else s[: n - 3] + "..."


def describe(t: Term, limit: int = 60) -> str:
    """``t`` in the user's names, shortened: ``sum(mask)``, ``sum(mask over S)``, ``x^-1``."""
    return _cap(_text(t, 3), limit)


def _text(t: Term, depth: int) -> str:  # noqa: PLR0911 -- one case per op family
    if t.op is Op.INPUT:
        return str(t.attrs[0])
    if t.op is Op.CONST:
        v = t.attrs[0]
        return str(v) if not isinstance(v, Fraction) or v.denominator != 1 else str(v.numerator)
    if depth == 0:
        return "..."
    sub = [_text(c, depth - 1) for c in t.args]
    match t.op:
        case Op.EINSUM:
            summed = sorted({d.name for c in t.args for d in c.dims} - set(t.attrs[0]))
            body = " * ".join(sub)
            return f"sum({body}" + (f" over {','.join(summed)})" if t.attrs[0] else ")")
        case Op.ADD:
            return "(" + " + ".join(sub) + ")"
        case Op.MUL:
            return " * ".join(sub)
        case Op.POW:
            return f"{sub[0]}^{t.attrs[0]}"
        case Op.SHARD:
            return f"{sub[0]}[{t.attrs[0]} on this {t.attrs[1]} rank]"
        case Op.CHUNK:
            return f"{sub[0]}[{t.attrs[0]} chunk {t.attrs[2]}/{t.attrs[1]}]"
    return f"{t.op.name.lower()}({', '.join(sub)})"


def certificate_entries(entries: Sequence[tuple[Term, Term, int, int]],
                        node: Any) -> list[dict[str, Any]]:
    """The certificate's ``denominators``: ``(argument, nf, requirement, proof step)``."""
    return [{"spec": node(d), "requirement": REQUIREMENT_NAMES[r], "nf": node(n), "proof": s,
             "text": describe(d)} for d, n, r, s in entries]


def assumed_signs(dens: SpecDenominators, binding: Any, steps: Any, node: Any, *,
                  deadline: float) -> tuple[Signs, list[dict[str, Any]]]:
    """The sign facts with the assumed spec denominators, and their certificate entries.

    Each assumed argument ``d`` is normalised *without* assumptions (so its proof ``d == nf``
    rests on the input domains alone, as the checker requires); ``d`` and ``nf`` are then
    assumed to fit their requirement (:func:`rewriting.signs.assumed_closure` adds the factors
    of a nonzero product)."""
    from proofs.normal import normalise_goals

    items = [(f"denominator:{k}", d, d) for k, (d, _) in enumerate(dens.assumed)]
    res = normalise_goals(items, binding, steps, node, progress=lambda *_: None,
                          deadline=deadline)
    rows = []
    for k, (d, r) in enumerate(dens.assumed):
        got = res.chains.get(f"denominator:{k}")
        if got is not None:   # a denominator the normaliser cannot handle is not assumed
            rows.append((d, got[0], r, got[2]))
    return Signs(assumed_facts([(d, n, r) for d, n, r, _ in rows])), \
        certificate_entries(rows, node)
