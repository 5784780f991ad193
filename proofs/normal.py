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
                    deadline: float, signs: Any = None) -> NormaliseResult:
    """Normalise both sides of every goal (one call: shared subterms are normalised once).

    ``signs``: the :class:`rewriting.signs.Signs` the cancelling rules' guards consult (default:
    the input domains alone; ``proofs/denominators.py`` adds the spec's assumed denominators).
    """
    res = NormaliseResult()
    try:
        from rewriting.normalise import Normaliser, normalise
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
        nfs, log = normalise(roots, binding, normaliser=Normaliser(binding, signs=signs))
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
    """``rewriting.normalise.ProofLog`` -> certificate steps.

    A log record proves ``term = nf`` by a chain of ``congr`` (children replaced by their normal
    forms; ``args[i]`` names the record of child ``i``), ``rule`` (one rule instance) and
    ``trans`` (continue with another record) links. Each record becomes one ``trans`` step of the
    certificate (memoised, so a shared subterm's proof is stored once).
    """

    def __init__(self, log: Any, steps: ProofSteps, node: Callable[[Term], int], counts: Counter):
        self.log, self.steps, self.node, self.counts = log, steps, node, counts
        self.memo: dict[int, int] = {}  # record id -> step id

    def chain(self, t: Term) -> int:
        """A step proving ``t == nf(t)`` (refl when ``t`` is normal)."""
        r = self.log.record_of.get(t)
        if r is None:
            return self.steps.refl(self.node(t))
        return self.record(r)

    def record(self, r0: int) -> int:
        # records only refer to earlier records: convert the needed ones in increasing order
        need, stack = set(), [r0]
        while stack:
            r = stack.pop()
            if r in need or r in self.memo:
                continue
            need.add(r)
            for s in self.log.records[r].steps:
                if s.kind == "congr":
                    stack.extend(a for a in s.args if a is not None)
                elif s.kind == "trans":
                    stack.append(s.record)
        for r in sorted(need):
            self.memo[r] = self._convert(r)
        return self.memo[r0]

    def _convert(self, r: int) -> int:
        rec = self.log.records[r]
        chain: list[int] = []
        cur = self.node(rec.term)
        for s in rec.steps:
            match s.kind:
                case "congr":
                    lhs, rhs = self.node(s.lhs), self.node(s.rhs)
                    args = [None if a is None else self.memo[a] for a in s.args]
                    chain.append(self.steps.congr(lhs, rhs, args))
                case "rule":
                    self.counts[s.rule] += 1
                    chain.append(self.steps.rule(s.rule, encode_subst(s.subst, self.node),
                                                 self.node(s.lhs), self.node(s.rhs)))
                case "trans":
                    chain.append(self.memo[s.record])
                case other:
                    raise ValueError(f"unknown log step kind {other!r}")
            if self.steps.lhs(chain[-1]) != cur:
                raise ValueError(f"record {r}: a {s.kind} step starts at node "
                                 f"{self.steps.lhs(chain[-1])}, not at the current node {cur}")
            cur = self.steps.rhs(chain[-1])
        if cur != self.node(rec.nf):
            raise ValueError(f"record {r} ends at node {cur}, not at its normal form")
        return self.steps.chain(self.node(rec.term), chain)
