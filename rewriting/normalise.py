"""The certifying normaliser: oriented rules applied bottom-up over the hash-consed DAG.

``normalise(roots, binding) -> (normal_forms, log)``. Each distinct node is normalised once
(memoised) by an explicit-stack walk (no recursion: a 128-layer model has ~10^5 nodes):

1. **Congr**: normalise the children; if any changed, ``t = op(nf(children))`` (same op, attrs
   and dims), justified by the children's records; continue from that node.
2. **Rule**: at a node whose children are normal, try the rules for its op in registry order;
   the first whose matcher returns a substitution σ rewrites ``lhs[σ] -> rhs[σ]``; continue
   by normalising ``rhs[σ]`` (its own record).
3. no rule applies: the node is normal.

The :class:`ProofLog` has one :class:`Record` per node that is not already normal, each a chain
``term = ... = nf`` of steps ``congr`` / ``rule`` / ``trans`` (reuse of another node's record).
Records only refer to earlier records. ``ProofLog.to_json`` serialises it with terms as ids of a
hash-consed node table; ``docs/rules.md`` documents the format and every rule.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from spec_lang.term import Binding, Op, Term, TermError, term

from rewriting import canonical as _canonical  # noqa: F401  (registers the rules)
from rewriting import contraction as _contraction  # noqa: F401
from rewriting import powers as _powers  # noqa: F401  (fractional powers of c * y)
from rewriting import activations as _activations  # noqa: F401  (SILU, GELU written out)
from rewriting import unit_axis as _unit_axis  # noqa: F401  (mesh axes of size 1)
from rewriting import collectives as _collectives  # noqa: F401
from rewriting import lifting as _lifting  # noqa: F401
from rewriting import permute as _permute  # noqa: F401  (after lifting: SHARD first)
from rewriting import expshift as _expshift  # noqa: F401  (max shifts of exp)
from rewriting.build import _missing, encode_attr
from rewriting.rule import RULES, Rule, RuleError, Subst, rules_for
from rewriting.signs import SignedBinding, Signs

__all__ = ["normalise", "Normaliser", "ProofLog", "Record", "Step", "NormaliseError",
           "RULESET", "LOG_FORMAT", "LOG_VERSION", "first_difference"]

RULESET_NAME = "tensor"
RULESET_VERSION = "2"


def _ruleset() -> dict[str, str]:
    """Name, version and sha256 of the rule table (name, group, law, guard of every rule)."""
    import hashlib
    import json

    rows = [[r.name, r.group, r.law, r.guard_doc] for r in RULES]
    digest = hashlib.sha256(json.dumps(rows, separators=(",", ":")).encode()).hexdigest()
    return {"name": RULESET_NAME, "version": RULESET_VERSION, "sha256": digest}


RULESET = _ruleset()
"""``{"name", "version", "sha256"}`` of the rule table (certificates record it)."""
LOG_FORMAT = "shardproof-normaliser-log"
LOG_VERSION = 1


class NormaliseError(TermError):
    """A term cannot be normalised (an op the rewriter does not handle, or a rule cycle)."""


@dataclass(frozen=True, slots=True)
class Step:
    """One link of a record's chain (see ``docs/rules.md``, "Log format").

    kind ``"congr"``: ``lhs`` and ``rhs`` have the same op, attrs and dims; ``args[i]`` is the
    record proving ``lhs.args[i] = rhs.args[i]`` (``None``: the two are the same node).
    kind ``"rule"``: ``lhs = rule.lhs(subst)``, ``rhs = rule.rhs(subst)``, guard holds.
    kind ``"trans"``: ``record``'s term is the current term; afterwards the current term is
    that record's normal form.
    """

    kind: str
    lhs: Term | None = None
    rhs: Term | None = None
    rule: str | None = None
    subst: Subst | None = None
    args: tuple[int | None, ...] | None = None
    record: int | None = None


@dataclass(slots=True)
class Record:
    """``term = nf`` by the chain ``steps`` (applied left to right from ``term``)."""

    term: Term
    nf: Term
    steps: list[Step]


@dataclass
class ProofLog:
    """The proof of every normalisation performed by one :class:`Normaliser`."""

    binding: Binding
    records: list[Record] = field(default_factory=list)
    record_of: dict[Term, int] = field(default_factory=dict)
    rule_counts: Counter = field(default_factory=Counter)
    rule_errors: list[str] = field(default_factory=list)  # rhs builders that raised TermError

    def record_id(self, t: Term) -> int | None:
        """The record proving ``t = nf(t)``; ``None`` when ``t`` is its own normal form."""
        return self.record_of.get(t)

    @property
    def steps(self) -> int:
        return sum(len(r.steps) for r in self.records)

    def chain(self, t: Term) -> list[Step]:
        """The flattened chain of rule and congr steps from ``t`` to its normal form."""
        r = self.record_of.get(t)
        return [] if r is None else list(self.records[r].steps)

    # -- serialisation ------------------------------------------------------------------------
    def to_json(self, node_table: Any = None, roots: Sequence[Term] = ()) -> dict:
        """The log as JSON-able data; terms are ids of ``node_table``.

        Args:
            node_table: any object with ``add(op: str, args: list[int], attrs: tuple,
                dims: tuple[(name, shards)]) -> int`` that hash-conses (e.g.
                ``proofs.kernel.NodeTable``). Nodes are added children first. If ``None``, a
                private table is made and emitted as ``"nodes"`` in the result.
            roots: terms whose ``{"term", "nf", "record"}`` are listed under ``"roots"``.
        """
        own = node_table is None
        table = _ListTable() if own else node_table
        ids: dict[int, int] = {}

        def nid(t: Term) -> int:
            n = ids.get(id(t))
            if n is not None:
                return n
            for x in _missing(t, lambda m: id(m) in ids):
                if id(x) not in ids:
                    ids[id(x)] = table.add(
                        x.op.name, [ids[id(c)] for c in x.args], x.attrs,
                        tuple((d.name, tuple(str(s) for s in d.shards)) for d in x.dims))
            return ids[id(t)]

        def sub(s: Subst) -> dict:
            out = {}
            for k, v in sorted(s.items()):
                if isinstance(v, Term):
                    out[k] = {"node": nid(v)}
                elif isinstance(v, tuple) and v and all(isinstance(x, Term) for x in v):
                    out[k] = {"nodes": [nid(x) for x in v]}
                else:  # an attribute; an empty list of terms is the attribute []
                    out[k] = encode_attr(v)
            return out

        recs = []
        for r in self.records:
            steps = []
            for s in r.steps:
                match s.kind:
                    case "congr":
                        steps.append({"kind": "congr", "lhs": nid(s.lhs), "rhs": nid(s.rhs),
                                      "args": list(s.args)})
                    case "rule":
                        steps.append({"kind": "rule", "rule": s.rule, "lhs": nid(s.lhs),
                                      "rhs": nid(s.rhs), "subst": sub(s.subst)})
                    case "trans":
                        steps.append({"kind": "trans", "record": s.record})
                    case _:
                        raise NormaliseError(f"unknown step kind {s.kind!r}")
            recs.append({"term": nid(r.term), "nf": nid(r.nf), "steps": steps})
        out: dict[str, Any] = {
            "format": LOG_FORMAT, "format_version": LOG_VERSION, "ruleset": dict(RULESET),
            "binding": {k: self.binding[k] for k in sorted(self.binding)},
            "records": recs,
            "roots": [{"term": nid(t), "nf": nid(self.nf_of(t)), "record": self.record_id(t)}
                      for t in roots],
            "rule_counts": dict(sorted(self.rule_counts.items())),
        }
        if own:
            out["nodes"] = table.to_json()
        return out

    def nf_of(self, t: Term) -> Term:
        r = self.record_of.get(t)
        return t if r is None else self.records[r].nf


class _ListTable:
    """A minimal hash-consed node table (the same JSON rows as ``proofs/kernel.py``)."""

    def __init__(self) -> None:
        self.rows: list[list] = []
        self.index: dict[tuple, int] = {}

    def add(self, op: str, args: list[int], attrs: tuple, dims: tuple) -> int:
        enc = [encode_attr(a) for a in attrs]
        key = (op, tuple(args), repr(enc), tuple(dims))
        i = self.index.get(key)
        if i is None:
            i = len(self.rows)
            self.rows.append([op, list(args), enc, [[n, list(s)] for n, s in dims]])
            self.index[key] = i
        return i

    def to_json(self) -> list:
        return self.rows


class _Frame:
    __slots__ = ("t", "state", "steps", "cur")

    def __init__(self, t: Term):
        self.t = t
        self.state = 0
        self.steps: list[Step] = []
        self.cur: Term | None = None


class Normaliser:
    """Memoised normalisation under one binding; one :class:`ProofLog` for all calls.

    Args:
        binding: real sizes of dims and mesh axes (guards and size constants use them).
        check: re-build ``lhs(σ)`` for every fired rule and compare with the node, re-run the
            guard and check that the rewrite keeps the dims (a self-check for tests; the
            certificate checker re-verifies every step anyway).
        signs: the sign facts of the spec's domain that the guards of cancelling rules consult
            (``rewriting/signs.py``; default: the input domains alone).
    """

    def __init__(self, binding: Binding, *, check: bool = False, signs: Signs | None = None):
        self.binding = binding if signs is None else SignedBinding(binding, signs)
        self.check = check
        self.log = ProofLog(binding)
        self._nf: dict[Term, Term] = {}

    def nf(self, t: Term) -> Term:
        """Normal form of ``t`` (normalising it if needed)."""
        got = self._nf.get(t)
        if got is None:
            self._run(t)
            got = self._nf[t]
        return got

    def normalise(self, roots: Iterable[Term]) -> list[Term]:
        return [self.nf(t) for t in roots]

    # -- the walk -----------------------------------------------------------------------------
    def _finish(self, fr: _Frame, nf: Term) -> None:
        t = fr.t
        self._nf[t] = nf
        if fr.steps:
            self.log.record_of[t] = len(self.log.records)
            self.log.records.append(Record(t, nf, fr.steps))

    def _run(self, root: Term) -> None:
        nf = self._nf
        started: set[Term] = set()
        stack: list[_Frame] = [_Frame(root)]
        while stack:
            fr = stack[-1]
            t = fr.t
            if fr.state == 0:
                if t in nf:
                    stack.pop()
                    continue
                if t in started:
                    raise NormaliseError(f"rewrite cycle through {t!r}")
                pending = [c for c in t.args if c not in nf]
                if pending:
                    for c in pending:
                        if c in started:
                            raise NormaliseError(f"rewrite cycle through {c!r}")
                        stack.append(_Frame(c))
                    fr.state = -1  # children pushed; come back once they are done
                    continue
                fr.state = -1
            if fr.state == -1:
                started.add(t)
                new_args = tuple(nf[c] for c in t.args)
                if any(a is not c for a, c in zip(new_args, t.args)):
                    cur = term(t.op, new_args, t.attrs, t.dims)
                    fr.steps.append(Step("congr", t, cur, args=tuple(
                        self.log.record_of.get(c) for c in t.args)))
                else:
                    cur = t
                    fired = self._rewrite(t)
                    if fired is None:
                        started.discard(t)
                        self._finish(fr, t)
                        stack.pop()
                        continue
                    rule, s, cur = fired
                    fr.steps.append(Step("rule", t, cur, rule=rule.name, subst=s))
                fr.cur = cur
                fr.state = 1
                if cur not in nf:
                    if cur in started:
                        raise NormaliseError(f"rewrite cycle through {cur!r}")
                    stack.append(_Frame(cur))
                continue
            # state 1: fr.cur is normalised
            cur = fr.cur
            r = self.log.record_of.get(cur)
            if r is not None:
                fr.steps.append(Step("trans", record=r))
            started.discard(t)
            self._finish(fr, nf[cur])
            stack.pop()

    def _rewrite(self, t: Term) -> tuple[Rule, Subst, Term] | None:
        if t.op is Op.REGION:
            raise NormaliseError(f"{t!r}: REGION must be lowered before normalisation")
        for rule in rules_for(t.op):
            s = rule.match(t, self.binding)
            if s is None:
                continue
            try:
                rhs = rule.rhs(s, self.binding)
            except TermError as err:  # ill-typed input: the rule does not apply (never a proof)
                self.log.rule_errors.append(f"{rule.name} at {t!r}: {err}")
                continue
            if self.check:
                if rule.lhs(s) is not t:
                    raise RuleError(f"rule {rule.name}: lhs(σ) does not rebuild {t!r}: "
                                    f"{rule.lhs(s)!r}")
                if not rule.guard(s, self.binding):
                    raise RuleError(f"rule {rule.name} matched {t!r} but its guard fails")
                if {d for d in rhs.dims} != {d for d in t.dims}:
                    raise RuleError(f"rule {rule.name} changed the dims of {t!r} to {rhs.dims}")
                if rhs is t:
                    raise RuleError(f"rule {rule.name} rewrote {t!r} to itself")
            self.log.rule_counts[rule.name] += 1
            return rule, s, rhs
        return None


def normalise(roots: Sequence[Term], binding: Binding, *,
              normaliser: Normaliser | None = None) -> tuple[list[Term], ProofLog]:
    """Normal forms of ``roots`` and the log proving ``root = nf`` for each.

    Pass the same ``normaliser`` to share memo and log across calls (spec and plan of all goals
    under one binding).

    Raises:
        NormaliseError: an unsupported op (``REGION``) or a rule cycle.
    """
    n = normaliser or Normaliser(binding)
    return n.normalise(roots), n.log


def first_difference(a: Term, b: Term) -> tuple[Term, Term] | None:
    """The first pair of differing subterms found walking ``a`` and ``b`` in parallel (for error
    notes: "normal forms differ at ..."); ``None`` if ``a is b``."""
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        if x is y:
            continue
        if x.op is not y.op or x.attrs != y.attrs or len(x.args) != len(y.args):
            return x, y
        diff = [(p, q) for p, q in zip(x.args, y.args) if p is not q]
        if not diff:
            return x, y
        stack.extend(reversed(diff))
    return None
