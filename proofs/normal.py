"""Certified normal forms: run ``rewriting.normalise`` and turn its log into certificate steps.

For each goal this gives ``(nf_expected, nf_actual, step_e, step_a)`` where ``step_e`` proves
``expected == nf_expected`` (a chain of ``congr`` and ``rule`` steps) and likewise ``step_a``.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from proofs.certificate import ProofSteps, encode_subst
from spec_lang.term import Binding, Term

__all__ = ["NormaliseResult", "normalise_goals"]


@dataclass
class NormaliseResult:
    chains: dict[str, tuple[Term, Term, int, int]] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    rule_counts: Counter = field(default_factory=Counter)


def normalise_goals(items: Sequence[tuple[str, Term, Term]], binding: Binding, steps: ProofSteps,
                    node: Callable[[Term], int], *, progress: Callable[[str, int, int], None],
                    deadline: float) -> NormaliseResult:
    """Normalise both sides of every goal (one call: shared subterms are normalised once)."""
    res = NormaliseResult()
    try:
        from rewriting import normalise  # type: ignore[attr-defined]
    except ImportError:
        normalise = None
    roots = [t for _, e, a in items for t in (e, a)]
    progress("rewrite", 0, len(items))
    if normalise is None:
        for name, e, a in items:
            res.chains[name] = (e, a, steps.refl(node(e)), steps.refl(node(a)))
        progress("rewrite", len(items), len(items))
        return res
    try:
        nfs, log = normalise(roots, binding)
    except Exception as err:  # noqa: BLE001 -- a normaliser failure leaves goals open, never proved
        for name, _, _ in items:
            res.failed[name] = f"normaliser failed: {type(err).__name__}: {err}"
        return res
    conv = _LogConverter(log, steps, node, res.rule_counts)
    nf_of = _nf_lookup(roots, nfs)
    for k, (name, e, a) in enumerate(items):
        if time.monotonic() > deadline:
            res.failed[name] = "timeout"
            continue
        try:
            se, sa = conv.chain(e), conv.chain(a)
            ne, na = nf_of(e), nf_of(a)
            if steps.rhs(se) != node(ne) or steps.rhs(sa) != node(na):
                raise ValueError("the log does not end at the reported normal form")
            res.chains[name] = (ne, na, se, sa)
        except Exception as err:  # noqa: BLE001 -- an unusable log leaves the goal open
            res.failed[name] = f"normaliser log not certifiable: {type(err).__name__}: {err}"
        progress("rewrite", k + 1, len(items))
    return res


def _nf_lookup(roots: list[Term], nfs: Any) -> Callable[[Term], Term]:
    if isinstance(nfs, dict):
        return lambda t: nfs[t]
    table = {id(r): n for r, n in zip(roots, nfs)}
    return lambda t: table[id(t)]


class _LogConverter:
    """ProofLog -> certificate steps (filled in against rewriting's documented log format)."""

    def __init__(self, log: Any, steps: ProofSteps, node: Callable[[Term], int], counts: Counter):
        self.log, self.steps, self.node, self.counts = log, steps, node, counts
        self.memo: dict[int, int] = {}

    def chain(self, t: Term) -> int:
        raise NotImplementedError("rewriting's log format")

    def rule_step(self, name: str, subst: dict[str, Any], lhs: Term, rhs: Term) -> int:
        self.counts[name] += 1
        return self.steps.rule(name, encode_subst(subst, self.node), self.node(lhs), self.node(rhs))
