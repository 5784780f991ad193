"""A rewrite rule as data, and the registry the normaliser, the egglog oracle and the tests share.

A :class:`Rule` is an oriented law ``lhs[σ] = rhs[σ]  if guard[σ]`` over terms:

* ``match(t, binding)`` returns a substitution σ with ``lhs(σ) is t`` and ``guard(σ)`` true, or
  ``None``. (Matchers are plain Python: they read the node's op, attrs, dims and children.)
* ``lhs(σ)`` / ``rhs(σ, binding)`` rebuild both sides from σ alone, so an independent checker
  that holds its own copy of the rule can re-instantiate a logged step.
* ``guard(σ, binding)`` re-checks the side condition (shapes use the binding's real sizes).
* ``sample(draw)`` builds a random instance ``(lhs_term, binding)`` on which ``match`` succeeds:
  the soundness test evaluates both sides of it in float64.

A substitution maps variable names to a :class:`~spec_lang.term.Term`, a tuple of terms, or an
attribute value (dim name, axis name, exact number, tuple of names). ``docs/rules.md`` lists each
rule's variables, lhs, rhs and guard.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from spec_lang.term import Binding, Op, Term

__all__ = ["Subst", "Draw", "Rule", "RULES", "rules_for", "register", "RuleError"]

Subst = dict[str, Any]


class RuleError(AssertionError):
    """A rule's matcher produced a substitution that does not rebuild the node (a bug)."""


class Draw(Protocol):
    """What a sampler may ask for (the tests adapt hypothesis' ``data.draw`` to this)."""

    def int(self, lo: int, hi: int) -> int: ...
    def choice(self, xs: Sequence[Any]) -> Any: ...
    def bool(self) -> bool: ...


@dataclass(frozen=True, eq=False)
class Rule:
    """One oriented, guarded law (see the module docstring)."""

    name: str
    law: str                                   # one line, shown in docs/rules.md
    guard_doc: str                             # the guard in words ("" = none)
    ops: frozenset[Op]                         # root ops of the lhs
    match: Callable[[Term, Binding], Subst | None]
    lhs: Callable[[Subst], Term]
    rhs: Callable[[Subst, Binding], Term]
    guard: Callable[[Subst, Binding], bool]
    sample: Callable[[Draw], tuple[Term, Binding]] | None = None
    group: str = field(default="")

    def __repr__(self) -> str:
        return f"Rule({self.name})"


RULES: list[Rule] = []
"""Every rule, in priority order (the normaliser tries them in this order at each node)."""

_BY_OP: dict[Op, list[Rule]] = {}


def register(rule: Rule) -> Rule:
    if any(r.name == rule.name for r in RULES):
        raise ValueError(f"duplicate rule name {rule.name!r}")
    RULES.append(rule)
    for op in rule.ops:
        _BY_OP.setdefault(op, []).append(rule)
    return rule


def rules_for(op: Op) -> list[Rule]:
    return _BY_OP.get(op, [])


def always(_s: Subst, _b: Binding) -> bool:
    return True
