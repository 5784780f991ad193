"""The lowering rules: one per ATen overload, each a pair of functions.

* ``dims(node, a) -> layout``: the named dims of the node's output (pass 1, :mod:`analysis`),
  stated with the :class:`~spec_lang.torch_frontend.dims.Dims` union-find of ``a``;
* ``term(node, b, *args) -> value``: the node's value as IR terms (pass 2, :mod:`lower`); ``args``
  are the node's arguments with every fx node replaced by its value.

A layout is a list (one per torch dim) of lists of atoms; a tuple of layouts for ops returning
tuples; ``None`` for non-tensor results. ``RULES`` maps ``str(overload)`` (``"aten.mm.default"``)
to its :class:`Rule`; every rule has a float64 soundness test against torch
(``tests/torch_frontend/test_rules_sound.py``), and ``test_every_rule_is_tested`` fails when one
has none.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Rule", "RULES", "rule", "Unsupported"]


class Unsupported(Exception):  # noqa: N818 -- a verdict-level fact, not a bug
    """A node has no lowering (an op without a rule, a pattern the rule does not cover).

    The goals that depend on it are UNKNOWN, naming ``op`` and the user's ``site``.
    """

    def __init__(self, op: str, site: str, why: str):
        super().__init__(f"{site}: {op}: {why}")
        self.op, self.site, self.why = op, site, why


@dataclass(frozen=True)
class Rule:
    """A lowering rule for the overloads in ``names``. ``inplace``: the op writes its first
    argument (or every tensor of its first list argument, for ``_foreach_*_``)."""

    names: tuple[str, ...]
    dims: Callable[..., Any]
    term: Callable[..., Any]
    inplace: bool = False
    doc: str = ""


RULES: dict[str, Rule] = {}


def rule(*names: str, inplace: bool | None = None) -> Callable[[type], type]:
    """Register the class's static ``dims`` and ``term`` under every overload in ``names``;
    the class docstring states the law (what the op means in the IR). ``inplace``: True or
    False for every name; None (default): by torch's naming, an op whose name ends in ``_``
    (``add_``, ``_foreach_mul_``) writes its first argument."""

    def deco(cls: type) -> type:
        for n in names:
            if n in RULES:
                raise ValueError(f"two lowering rules for {n}")
            op = n.split(".")[1] if n.count(".") >= 2 else n
            ip = op.endswith("_") if inplace is None else inplace
            RULES[n] = Rule((n,), cls.dims, cls.term, ip, (cls.__doc__ or "").strip())
        return cls

    return deco
