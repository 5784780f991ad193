"""Rewriting: canonical forms, tensor rules and the certifying normaliser (``docs/rules.md``).

``normalise(roots, binding) -> (normal_forms, ProofLog)`` is the entry point; every rule is a
data entry in :data:`RULES` (name, law, guard, lhs/rhs builders, instance sampler).
"""

from rewriting.normalise import (
    LOG_FORMAT, LOG_VERSION, RULESET, Normaliser, NormaliseError, ProofLog, Record, Step,
    first_difference, normalise,
)
from rewriting.egraph import Decision, EgraphError, decide
from rewriting.explore import EXPLORE
from rewriting.rule import RULES, Rule, RuleError, rules_for

__all__ = [
    # normalise.py
    "normalise", "Normaliser", "NormaliseError", "ProofLog", "Record", "Step", "RULESET",
    "LOG_FORMAT", "LOG_VERSION", "first_difference",
    # rule.py
    "RULES", "Rule", "RuleError", "rules_for",
    # egraph.py, explore.py
    "decide", "Decision", "EgraphError", "EXPLORE",
]
