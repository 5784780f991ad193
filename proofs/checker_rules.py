"""The checker's own copy of the rewrite-rule table (``docs/rules.md``), over kernel nodes.

Each rule is data: a name, the law as a comment, a left and a right *pattern*, and a guard.
A certificate's ``rule`` step gives the rule name and a substitution (variable -> node id,
list of node ids, or attribute value); the checker instantiates both patterns under the
substitution, requires them to be exactly the step's ``lhs`` and ``rhs`` nodes (op, attrs and
children; dims are fixed by the kernel's shape rules, which every node passes), and
re-evaluates the guard on the real sizes. Rules whose two sides are not patterns (n-ary
canonical forms, constant folding) are *procedural*: a small function checks the claimed
``lhs``/``rhs`` pair directly.

This file is written by hand from ``docs/rules.md``; it shares no code with ``rewriting/``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from proofs.kernel import NodeTable

__all__ = ["RULESET", "RULES", "Rule", "RuleMismatch", "instantiate_and_match",
           "V", "Vs", "A", "P"]


class RuleMismatch(Exception):
    """A rule instance does not match the step's nodes, or its guard fails."""


@dataclass(frozen=True)
class V:
    """A term variable (bound to one node)."""
    name: str


@dataclass(frozen=True)
class Vs:
    """A list-of-terms variable, spliced into an n-ary op's arguments."""
    name: str


@dataclass(frozen=True)
class A:
    """An attribute variable."""
    name: str


@dataclass(frozen=True)
class P:
    """An op node pattern: ``P("SHARD", (A("d"), A("a")), V("x"))``."""
    op: str
    attrs: tuple[Any, ...] = ()
    args: tuple[Any, ...] = ()

    def __init__(self, op: str, attrs: tuple[Any, ...] = (), *args: Any):
        object.__setattr__(self, "op", op)
        object.__setattr__(self, "attrs", tuple(attrs))
        object.__setattr__(self, "args", tuple(args))


class Env:
    """What a guard or attribute function sees: the substitution, node types, sizes."""

    def __init__(self, subst: Mapping[str, tuple[str, Any]], table: NodeTable,
                 binding: Mapping[str, int]):
        self.subst, self.t, self.b = subst, table, binding

    def node(self, name: str) -> int:
        kind, v = self._get(name)
        if kind != "node":
            raise RuleMismatch(f"variable {name} must be a term")
        return v

    def nodes(self, name: str) -> tuple[int, ...]:
        kind, v = self._get(name)
        if kind != "nodes":
            raise RuleMismatch(f"variable {name} must be a list of terms")
        return v

    def attr(self, name: str) -> Any:
        kind, v = self._get(name)
        if kind != "attr":
            raise RuleMismatch(f"variable {name} must be an attribute")
        return v

    def _get(self, name: str) -> tuple[str, Any]:
        if name not in self.subst:
            raise RuleMismatch(f"substitution has no variable {name}")
        return self.subst[name]

    def dims(self, name_or_id: str | int) -> dict[str, tuple[str, ...]]:
        i = self.node(name_or_id) if isinstance(name_or_id, str) else name_or_id
        return dict(self.t.nodes[i][3])

    def op(self, i: int) -> str:
        return self.t.nodes[i][0]

    def local_size(self, dim: str, shards: tuple[str, ...]) -> int:
        n = self.b[dim]
        for a in shards:
            k = int(a.split("/")[1]) if a.startswith("#") else self.b[a]
            if n % k:
                raise RuleMismatch(f"dim {dim} does not divide over {shards}")
            n //= k
        return n


@dataclass(frozen=True)
class Rule:
    name: str
    law: str
    lhs: Any = None
    rhs: Any = None
    guard: Callable[[Env], bool] | None = None
    check: Callable[[Env, int, int], None] | None = None  # procedural rules
    vars: tuple[str, ...] = field(default=())


def _match(pat: Any, node: int, env: Env, path: str) -> None:
    t = env.t
    if isinstance(pat, V):
        want = env.node(pat.name)
        if want != node:
            raise RuleMismatch(f"at {path}: variable {pat.name} is node {want}, found node {node}")
        return
    if not isinstance(pat, P):
        raise RuleMismatch(f"bad pattern at {path}")
    op, args, attrs, _ = t.nodes[node]
    if op != pat.op:
        raise RuleMismatch(f"at {path}: expected op {pat.op}, found {op} (node {node})")
    want_attrs = tuple(_attr(a, env) for a in pat.attrs)
    if want_attrs != attrs or [type(x) for x in want_attrs] != [type(x) for x in attrs]:
        raise RuleMismatch(f"at {path}: expected attrs {want_attrs!r}, found {attrs!r} "
                           f"(node {node})")
    sub: list[Any] = []
    for a in pat.args:
        if isinstance(a, Vs):
            sub.extend(V_fixed(x) for x in env.nodes(a.name))
        else:
            sub.append(a)
    if len(sub) != len(args):
        raise RuleMismatch(f"at {path}: expected {len(sub)} args, found {len(args)} (node {node})")
    for k, (p, c) in enumerate(zip(sub, args)):
        if isinstance(p, V_fixed):
            if p.node != c:
                raise RuleMismatch(f"at {path}/{k}: expected node {p.node}, found node {c}")
        else:
            _match(p, c, env, f"{path}/{k}")


@dataclass(frozen=True)
class V_fixed:  # noqa: N801 -- internal: an already-resolved node in a spliced list
    node: int


def _attr(a: Any, env: Env) -> Any:
    if isinstance(a, A):
        return env.attr(a.name)
    if callable(a):
        return a(env)
    return a


def instantiate_and_match(rule: Rule, subst: Mapping[str, tuple[str, Any]], table: NodeTable,
                          binding: Mapping[str, int], lhs: int, rhs: int) -> None:
    """Check that ``lhs -> rhs`` is an instance of ``rule`` under ``subst`` whose guard holds.

    Raises:
        RuleMismatch: naming the first difference or the failing guard.
    """
    env = Env(subst, table, binding)
    try:
        if rule.check is not None:
            rule.check(env, lhs, rhs)
            return
        _match(rule.lhs, lhs, env, "lhs")
        _match(rule.rhs, rhs, env, "rhs")
        if rule.guard is not None and not rule.guard(env):
            raise RuleMismatch("guard does not hold")
    except (KeyError, IndexError, TypeError, ValueError) as e:
        raise RuleMismatch(f"{type(e).__name__}: {e}") from None


# ---------------------------------------------------------------------------------------------
# The rule table. Filled from docs/rules.md (ruleset name, version and sha256 below must be the
# ones the prover reports; a test compares them with rewriting's table).
# ---------------------------------------------------------------------------------------------
RULESET: dict[str, str] = {"name": "tensor", "version": "0", "sha256": "0" * 64}

_rules: list[Rule] = []


def _rule(r: Rule) -> Rule:
    _rules.append(r)
    return r


RULES: dict[str, Rule] = {r.name: r for r in _rules}
