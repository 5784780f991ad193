"""Errors of the DSL: one base, one class for specs and one for plans (STYLE rule 15).

Every message starts with the user's ``file:line:`` (the first stack frame outside the core
``spec_lang`` modules, see :func:`spec_lang.tensor.user_site`) and says what to change.
"""

from __future__ import annotations

__all__ = ["SpecLangError", "SpecError", "PlanError", "UnknownAxisError"]


class SpecLangError(ValueError):
    """Base of every error the DSL raises on bad user input."""


class SpecError(SpecLangError):
    """A spec (model, data, loss, optimizer) is malformed: shapes, dims, unknown ops, bad file."""


class PlanError(SpecLangError):
    """A plan (mesh, placements, per-rank program, collectives, declared backwards) is malformed."""


class UnknownAxisError(PlanError, AttributeError):
    """``Axis.<NAME>`` with no such member (also an ``AttributeError``, so ``hasattr`` works)."""
