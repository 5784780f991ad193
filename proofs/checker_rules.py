"""The checker's own copy of the rewrite-rule table (``docs/rules.md``), over kernel nodes.

A certificate's ``rule`` step names a rule and gives a substitution (variable -> node id, list
of node ids, or attribute value). For each rule this module rebuilds the two sides from the
substitution as *patterns* (op, attrs and children; dims where they carry information that the
kernel's shape rules do not fix, e.g. the output spec of ``ONE_HOT``/``CONCAT`` or the order
``dims-sort`` produces), matches them against the step's ``lhs`` and ``rhs`` nodes, and
re-evaluates the guard on the real sizes. Every node has already passed the kernel's shape
rules, so dims not fixed by a pattern are the ones the op's meaning implies.

Written by hand from ``docs/rules.md``: it imports nothing from ``rewriting/``. The laws and
guards are restated below so that the ruleset hash (:func:`ruleset_sha256`, over the
``(name, group, law, guard)`` rows in priority order) matches the producer's only if the tables
agree; a test checks that it does.

The rules live in :mod:`proofs.checker_rules_canonical`, :mod:`proofs.checker_rules_lifting`
and :mod:`proofs.checker_rules_cp` (imported here in priority order), over the patterns of
:mod:`proofs.checker_patterns`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import proofs.checker_rules_canonical  # noqa: F401 -- registers, in priority order
import proofs.checker_rules_lifting  # noqa: F401
import proofs.checker_rules_cp  # noqa: F401
from proofs.checker_patterns import RULE_ROWS, Env, P, Rule, RuleMismatch, _match
from proofs.checker_signs import Signs
from proofs.kernel import NodeTable

__all__ = ["RULESET", "RULES", "Rule", "RuleMismatch", "instantiate_and_match", "ruleset_sha256",
           "P"]

_RULES = RULE_ROWS

# ==== the table ================================================================================
RULES: dict[str, Rule] = {r.name: r for r in _RULES}


def ruleset_sha256(rows: list[tuple[str, str, str, str]]) -> str:
    """sha256 of the ``[name, group, law, guard]`` rows in priority order (as the producer's
    ``rewriting.RULESET``): any added, removed, reordered or reworded rule changes it."""
    return hashlib.sha256(json.dumps([list(r) for r in rows], separators=(",", ":"))
                          .encode()).hexdigest()


RULESET: dict[str, str] = {
    "name": "tensor",
    "version": "2",
    "sha256": ruleset_sha256([(r.name, r.group, r.law, r.guard_doc) for r in _RULES]),
}


def varying_table(table: NodeTable) -> list[frozenset[str]]:
    """Mesh axes each node varies over (as ``spec_lang.term.varying_axes``; stricter for a
    ``ONE_HOT`` whose output dim is sharded: it varies over those axes). A node whose children
    all vary over the same axes, and whose op adds or removes none, shares its first child's
    set (most nodes: DeepSeek-V3's 250,000 would otherwise build a set each)."""
    out: list[frozenset[str]] = []
    none: frozenset[str] = frozenset()
    for op, args, attrs, dims in table.nodes:
        v = out[args[0]] if args else none
        for c in args[1:]:
            w = out[c]
            if w is not v and not w <= v:
                v = v | w
        if op == "SHARD":
            v = v | {attrs[1]}
        elif op in ("PART", "RANK_CONST", "REDUCE_SCATTER", "ALL_TO_ALL"):
            v = v | {attrs[0]}
        elif op in ("ALL_REDUCE", "ALL_GATHER", "BROADCAST"):
            v = v - {attrs[0]}
        elif op == "ONE_HOT":
            v = v | {a for n, s in dims if n == attrs[0] for a in s if not a.startswith("#")}
        out.append(v)
    return out


def instantiate_and_match(rule_: Rule, subst: Mapping[str, tuple[str, Any]], table: NodeTable,
                          binding: Mapping[str, int], lhs: int, rhs: int,
                          varying: list[frozenset[str]], signs: Signs | None = None) -> None:
    """Check that ``lhs -> rhs`` is an instance of ``rule_`` under ``subst`` whose guard holds;
    ``signs``: the sign facts definedness guards consult (default: the input domains alone).

    Raises:
        RuleMismatch: naming the first difference or the failing guard.
    """
    env = Env(subst, table, binding, lambda i: varying[i], signs)
    try:
        lp, rp = rule_.sides(env)
        _match(lp, lhs, table, "lhs")
        _match(rp, rhs, table, "rhs")
    except RuleMismatch:
        raise
    except (KeyError, IndexError, TypeError, ValueError, AttributeError, ZeroDivisionError) as e:
        raise RuleMismatch(f"{type(e).__name__}: {e}") from None
