"""Partial-value semantics: which ops commute with a pending sum, and a lint that uses the table.

A value is *pending over axis a* (DTensor ``Partial("sum")``) when each rank holds an addend and
the meaning is the sum of the addends over ``a``: ``PART(x, a)``, or a contraction (``sum``,
``mean``, ``einsum``) over a dim that is sharded over ``a`` (each rank sums its own block).
Applying ``f`` to the addends before the reduction is only right where ``f`` is linear:
``sum_r f(a_r) = f(sum_r a_r)``. Source: PyTorch issues #149768 and #163193 (adding a Python
scalar to a Partial DTensor adds it once per rank: ``x.sum() + 10`` on 2 ranks gives 65, not
55; in FSDP2's ``clip_grad_norm_`` the same error is ``(R - 1) * eps``), CASES.md B26.

:data:`PARTIAL_TABLE` maps each op name to a :class:`PartialRule` (does the op commute with a
pending sum in the argument that is pending, and why). ``tests/spec_lang/test_partial.py`` proves
every row numerically: for each op both sides, ``ALL_REDUCE(f(PART(x, a)), a)`` and
``f(x)``, are evaluated in float64 on random addends; rows marked ``commutes=True`` agree on
every draw, rows marked ``False`` show a counterexample.

:func:`pending_sum_notes` is the trace-time lint: :func:`spec_lang.collectives.all_reduce`
(sum), ``reduce_scatter`` and reducing regions call it on their argument, and a
:class:`PartialSumWarning` names each non-commuting op found between the pending sum and its
reduction. While a plan is traced (:func:`grouped_warnings`, ``build_problem``) they are
grouped: one warning per site with a count, at the site's line, the earliest op first.
It is a *note*, never an error: the plan still reaches the prover, which decides it (a plan may
add ``s / |a|`` on every rank on purpose, and the prover proves that right).
"""

from __future__ import annotations

import os
import sys
import warnings
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from spec_lang.term import Op, Term, varying_axes

__all__ = ["PartialRule", "PARTIAL_TABLE", "PartialSumWarning", "is_pending", "pending_sum_notes",
           "warn_pending", "grouped_warnings"]


@dataclass(frozen=True)
class PartialRule:
    """How op ``op`` treats an argument that is a pending sum over an axis ``a``.

    Attributes:
        op: the :class:`~spec_lang.term.Op` name.
        commutes: ``f(sum_r a_r) == sum_r f(a_r)`` for the pending argument (others replicated
            over ``a``); for ``ADD`` / ``MUL`` / ``EINSUM`` / ``WHERE`` the condition is in
            ``when``.
        when: the condition under which it commutes (empty: always / never).
        why: the identity or the counterexample, in one line.
    """

    op: str
    commutes: bool
    when: str
    why: str


def _r(op: str, commutes: bool, why: str, when: str = "") -> PartialRule:
    return PartialRule(op, commutes, when, why)


PARTIAL_TABLE: dict[str, PartialRule] = {r.op: r for r in (
    _r("ADD", True, "sum_r (a_r + b_r) = sum_r a_r + sum_r b_r; a replicated operand c is "
       "added |a| times: sum_r (a_r + c) = sum_r a_r + |a| c",
       when="every operand is pending over the axis (a replicated, non-zero operand: no, "
            "unless the reduction is a mean: mean_r (a_r + c) = mean_r a_r + c)"),
    _r("NEG", True, "sum_r (-a_r) = -sum_r a_r"),
    _r("MUL", True, "sum_r (c a_r) = c sum_r a_r for c replicated; two pending factors: "
       "sum_r a_r b_r != (sum_r a_r)(sum_r b_r)",
       when="exactly one factor is pending, the others replicated over the axis"),
    _r("EINSUM", True, "a contraction is linear in each operand: as MUL",
       when="exactly one operand is pending, the others replicated over the axis"),
    _r("CAST", True, "identity over the reals"),
    _r("STOP_GRAD", True, "identity in value"),
    _r("RENAME", True, "moves values, elementwise linear"),
    _r("CHUNK", True, "a block of a sum is the sum of the blocks"),
    _r("CONCAT", True, "concatenation of pending blocks is the pending concatenation; a "
       "replicated block is summed |a| times",
       when="every block is pending over the axis"),
    _r("WHERE", True, "where(c, a, b) with c replicated selects elementwise: linear in (a, b); "
       "a replicated branch is summed |a| times",
       when="the condition is replicated and both branches are pending"),
    _r("RECIP", False, "1 / (a_1 + a_2) != 1 / a_1 + 1 / a_2"),
    _r("POW", False, "(a_1 + a_2)^e != a_1^e + a_2^e for e != 1"),
    _r("EXP", False, "exp(a_1 + a_2) = exp(a_1) exp(a_2), not their sum"),
    _r("LOG", False, "log(a_1 + a_2) != log a_1 + log a_2"),
    _r("SQRT", False, "sqrt(a_1 + a_2) != sqrt a_1 + sqrt a_2 (the norm of a sharded vector)"),
    _r("RSQRT", False, "as SQRT"),
    _r("SIGMOID", False, "non-linear"),
    _r("SILU", False, "non-linear"),
    _r("TANH", False, "non-linear"),
    _r("GELU", False, "non-linear"),
    _r("ERF", False, "non-linear"),
    _r("MAXIMUM", False, "max(a_1 + a_2, c) != max(a_1, c) + max(a_2, c)"),
    _r("REDUCE_MAX", False, "max of a sum is not the sum of maxes"),
    _r("ALL_REDUCE_MAX", False, "max over ranks of the addends is not their sum"),
)}
"""Op name -> :class:`PartialRule`; ``ALL_REDUCE_MAX`` is ``ALL_REDUCE(.., "max")`` over the
pending axis. Ops absent from the table are not known to commute (the lint notes them)."""


class PartialSumWarning(UserWarning):
    """A non-linear op is applied to a pending sum (``Partial("sum")``) before its reduction."""


_PENDING: weakref.WeakKeyDictionary[Term, dict[str, bool]] = weakref.WeakKeyDictionary()


def _contracts_over(t: Term, axis: str) -> bool:
    """An EINSUM that sums a dim sharded over ``axis`` in some operand: each rank's result is
    its addend of the full contraction."""
    out = set(t.attrs[0])
    return any(axis in d.shards for a in t.args for d in a.dims if d.name not in out)


def is_pending(t: Term, axis: str) -> bool:
    """Whether ``t`` is (or contains, through any op) a pending sum over ``axis`` that has not
    been reduced: ``PART(., axis)`` or a contraction of a dim sharded over ``axis``, not yet
    under ``ALL_REDUCE(axis, "sum")`` / ``REDUCE_SCATTER(axis)`` / a reducing REGION."""
    memo = _PENDING
    stack: list[tuple[Term, bool]] = [(t, False)]
    while stack:
        n, done = stack.pop()
        m = memo.get(n)
        if m is not None and axis in m:
            continue
        if not done:
            stack.append((n, True))
            stack.extend((c, False) for c in n.args)
            continue
        memo.setdefault(n, {})[axis] = _pending_node(n, axis, memo)
    return memo[t][axis]


def _resolves(n: Term, axis: str) -> bool:
    if n.op in (Op.ALL_REDUCE, Op.REDUCE_SCATTER) and n.attrs[0] == axis:
        return True
    return n.op is Op.REGION and n.attrs[3] == axis and n.attrs[1] in ("all_reduce",
                                                                        "reduce_scatter")


def _pending_node(n: Term, axis: str, memo) -> bool:
    if _resolves(n, axis):
        return False
    if n.op is Op.PART and n.attrs[0] == axis:
        return True
    if n.op is Op.EINSUM and _contracts_over(n, axis):
        return True
    return any(memo[c][axis] for c in n.args)


def _is_zero(t: Term) -> bool:
    return t.op is Op.CONST and t.attrs[0] == 0


def _over_axis_size(t: Term, axis: str) -> bool:
    """``c * (1 / |axis|)``: added on every rank it sums to ``c`` (the documented workaround)."""
    def inv(u: Term) -> bool:
        return u.op is Op.RECIP and u.args[0].op is Op.AXIS_SIZE and u.args[0].attrs[0] == axis
    return inv(t) or (t.op is Op.MUL and any(inv(u) for u in t.args))


def _replicated_operands(args, pend, axis: str) -> list[Term]:
    """Operands that are not pending, do not vary over ``axis`` and are not zero (nor the
    ``c / |axis|`` workaround): combined additively with a pending sum they count |axis| times."""
    return [c for c, p in zip(args, pend)
            if not p and axis not in varying_axes(c) and not _is_zero(c)
            and not _over_axis_size(c, axis)]


def _violation(n: Term, axis: str, average: bool = False) -> str | None:
    """Why op ``n`` does not commute with the pending sum over ``axis`` in its arguments
    (``average``: the reduction is a mean, with which affine maps commute too)."""
    pend = [is_pending(c, axis) for c in n.args]
    name = n.op.name
    match n.op:
        case Op.ADD | Op.WHERE | Op.CONCAT if average and not (n.op is Op.WHERE and pend[0]):
            return None                 # mean_r (a_r + c) = mean_r a_r + c
        case Op.ADD:
            rep = _replicated_operands(n.args, pend, axis)
            return (f"ADD of a value replicated over {axis} to a pending sum: it is added |{axis}| "
                    "times (" + PARTIAL_TABLE["ADD"].why.split("; ")[1] + ")") if rep else None
        case Op.MUL | Op.EINSUM:
            return (f"{name} of {sum(pend)} pending factors over {axis}: "
                    "sum_r a_r b_r != (sum_r a_r)(sum_r b_r)") if sum(pend) >= 2 else None
        case Op.WHERE:
            if pend[0]:
                return f"WHERE with a condition pending over {axis}"
            return (f"WHERE choosing between a pending sum and a value replicated over {axis}: "
                    f"the replicated branch is summed |{axis}| times") \
                if _replicated_operands(n.args[1:], pend[1:], axis) else None
        case Op.CONCAT:
            return (f"CONCAT of pending blocks with a block replicated over {axis}: that block "
                    f"is summed |{axis}| times") \
                if _replicated_operands(n.args, pend, axis) else None
        case Op.ALL_REDUCE if n.attrs[1] == "max":
            return ("ALL_REDUCE max of a pending sum: " + PARTIAL_TABLE["ALL_REDUCE_MAX"].why
                    if n.attrs[0] == axis else None)
        case Op.BROADCAST | Op.SHARD if n.attrs[0 if n.op is Op.BROADCAST else 1] == axis:
            return f"{name} over {axis} of a pending sum over {axis} picks one rank's addend"
        case _:
            rule = PARTIAL_TABLE.get(name)
            if rule is not None and not rule.commutes:
                return f"{name}: {rule.why}"
            if rule is None and n.op in _LINEAR_MOVES:
                return None
            if rule is None:
                return f"{name}: not known to commute with a pending sum"
            return None


_LINEAR_MOVES = frozenset(getattr(Op, x) for x in (
    "SHARD", "ALL_REDUCE", "ALL_GATHER", "REDUCE_SCATTER", "BROADCAST", "ALL_TO_ALL", "REGION",
    "PERMUTE", "SHIFT", "PART") if hasattr(Op, x))
"""Data movement over *other* axes and block permutations: linear in their argument."""


def pending_sum_notes(x: Term, axis: str, *, average: bool = False) -> list[tuple[Term, str]]:
    """Every node between a pending sum over ``axis`` and a reduction of ``x`` over ``axis``
    that does not commute with the sum, with the reason (dataflow order, children first).
    ``average``: the reduction is a mean (``all_reduce(.., "avg")``), so adding a replicated
    value is fine (``mean_r (a_r + c) = mean_r a_r + c``); non-linear ops are still noted.

    Only nodes whose value is still pending are visited (a subterm already reduced over ``axis``
    is a replicated value and may be used non-linearly)."""
    if not is_pending(x, axis):
        return []
    out: list[tuple[Term, str]] = []
    seen: set[int] = set()
    stack = [x]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if n.op is Op.PART or (n.op is Op.EINSUM and _contracts_over(n, axis)
                               and not any(is_pending(c, axis) for c in n.args)):
            continue                              # a source of the pending sum
        why = _violation(n, axis, average)
        if why is not None:
            out.append((n, why))
        stack.extend(c for c in n.args if is_pending(c, axis))
    out.sort(key=lambda p: p[0].uid)
    return out


@dataclass(frozen=True)
class _Note:
    """One lint finding: the op's site, the reason, the axis, where the value is reduced, the
    first frame outside the ``spec_lang`` package at the reduction (the user's line that led to
    a library site) and the op's term id (dataflow order)."""

    site: str
    why: str
    axis: str
    reduce_site: str
    caller: str
    order: int


_COLLECTING: list[list[_Note]] = []   # the notes of the traces in progress (innermost last)
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def _outer_site() -> str:
    """``file:line`` of the innermost frame outside the ``spec_lang`` package (models and plan
    library included), or ``""``."""
    f = sys._getframe(1)  # noqa: SLF001 -- as spec_lang.tensor.user_site
    while f is not None:
        fn = f.f_code.co_filename
        if not os.path.abspath(fn).startswith(_PACKAGE_DIR + os.sep) and "importlib" not in fn \
                and not fn.startswith("<"):
            return f"{fn}:{f.f_lineno}"
        f = f.f_back
    return ""


LINT = [True]
"""``LINT[0] = False`` turns :func:`warn_pending` off: the checker's re-trace child
(``proofs/isolation.py``, verb ``retrace``), whose warnings nobody reads; on DeepSeek-V3 the lint
is about a sixth of the trace's CPU (issue 14). Terms are the same either way."""


def warn_pending(x: Term, axis: str, reduce_site: str, *, average: bool = False) -> None:
    """The lint at a reduction of ``x`` over ``axis``: one :class:`PartialSumWarning` per note of
    :func:`pending_sum_notes`, at once, or grouped per site when a trace collects them
    (:func:`grouped_warnings`); nothing when :data:`LINT` is off."""
    from spec_lang.tensor import site_of

    if not LINT[0]:
        return
    notes = pending_sum_notes(x, axis, average=average)
    if not notes:
        return
    caller = _outer_site()
    found = []
    for n, why in notes:
        where = site_of(n)
        found.append(_Note(reduce_site if where.startswith("<unknown>") else where, why, axis,
                           reduce_site, caller, n.uid))
    if _COLLECTING:
        _COLLECTING[-1].extend(found)
    else:
        _emit(found)


@contextmanager
def grouped_warnings() -> Iterator[None]:
    """Collect the lint's notes while a plan is traced and emit them at the end, grouped: one
    :class:`PartialSumWarning` per (site, reason, axis) with its count, at the site's file and
    line, earliest op in dataflow order first: the first op that mis-handles a pending sum
    names the bug, later notes are mostly its consequences (issue 12, item 5). Notes of a trace
    that raises are dropped (the error is the message)."""
    notes: list[_Note] = []
    _COLLECTING.append(notes)
    try:
        yield
    finally:
        _COLLECTING.pop()
    _emit(notes)


def _emit(notes: list[_Note]) -> None:
    groups: dict[tuple[str, str, str], list[_Note]] = {}
    for n in notes:
        groups.setdefault((n.site, n.why, n.axis), []).append(n)
    for (site, why, axis), g in sorted(groups.items(), key=lambda kv: min(n.order
                                                                           for n in kv[1])):
        reduced = list(dict.fromkeys(n.reduce_site for n in g))
        at = reduced[0] + (f" (and {len(reduced) - 1} more)" if len(reduced) > 1 else "")
        callers = list(dict.fromkeys(n.caller for n in g if n.caller and n.caller != site))
        via = f"; reached from {callers[0]}" if site.startswith(_PACKAGE_DIR) and callers else ""
        times = f" [{len(g)} times]" if len(g) > 1 else ""
        msg = (f"{site}: {why}; the value is Partial(sum) over {axis} and reduced at {at}: "
               f"reduce first (Partial -> Replicate), or scale the operand by 1/|{axis}| (the "
               f"prover decides the plan either way){via}{times}")
        file, _, line = site.rpartition(":")
        warnings.warn_explicit(PartialSumWarning(msg), PartialSumWarning, file or site,
                               int(line) if line.isdigit() else 0)
