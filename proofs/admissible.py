"""Shape-reduction admissibility: at which dim sizes an identity of two terms may be decided.

The theorem is ``docs/soundness.md`` (Theorems A and B); this module is its side-condition
checker, run by the prover before a z3 query or a refutation and again, independently, by the
checker on the certificate's nodes and *real* binding. It is part of the checker's trusted base:
it reads kernel node rows ``(op, args, attrs, dims)`` (:mod:`proofs.kernel`) and imports nothing
but the standard library.

Dims linked by ``RENAME`` form a *size class* ``c``. At the real sizes every block size of a
member dim (its size over the product of the axes and chunk parts that cut it, and PERMUTE's
sub-blocks) is a multiple of the class's *unit* ``U_c`` (their gcd), so every layout op moves
whole runs of ``U_c`` elements and keeps a position's *offset* ``o`` in ``[0, U_c)``. The
*row* ``R_o`` is every input element at offset ``o``. Shrinking the class to ``m`` offsets per
unit (size ``n_d / U_c * m``) keeps every block structure; the theorem says when the identity
at ``m`` offsets is the identity at every size:

* the class is *fixed* (keeps its real size) when an op reads positions or sizes of it
  (``DIM_SIZE``, ``CAUSAL_MASK``, ``ROPE_*``, ``ONE_HOT``, ``TOPK_MASK``, ``SHIFT``,
  ``REDUCE_MAX`` over it, an index input ranging over it) or a node carries two of its dims;
* otherwise every value is a polynomial in *power sums* ``sum_o phi(R_o)`` (one per ``EINSUM``
  contracting the class) with coefficients that are functions of the node's own row. It is
  admissible when no non-polynomial op (``EXP``, ``RECIP``, ``MAXIMUM``, ...) takes a summed
  value and every contracted summand vanishes on the zero row (no count ``|d| = sum 1``). Then
  equality at ``m >= W_c + [a root carries c]`` offsets (``W_c``: the largest number of power
  sums multiplied together, 0 for an elementwise class) holds at every size (Theorem B; A is
  ``W_c = 0``).

A refutation replayed at reduced sizes is a refutation at the real sizes when each reduced class
is admissible and, if it is summed, every op on its values is total (no ``RECIP``, ``LOG``,
``SQRT``, ``RSQRT`` or non-natural ``POW``): a witness at ``m`` offsets padded with zero rows is a
witness at the real size (docs/soundness.md, Corollary C).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from proofs.size_literals import literal_suspects

__all__ = ["ASSUMPTION", "AdmissibilityError", "Admissibility", "SizeClass", "analyse",
           "proof_binding", "refutation_binding_error", "refutation_problems", "size_kinds",
           "related_alike", "smt_binding_error", "replay_error", "MESH_AXES", "ORDERED_KINDS"]

MESH_AXES = ("dp", "tp", "pp", "cp", "sp", "ep", "mb", "dp_replicate", "dp_shard")
ASSUMPTION = ("shape reduction: smt steps at reduced dim sizes hold at the real sizes by "
              "docs/soundness.md Theorems A and B (side conditions recomputed per step)")

# ops whose value at an offset is a polynomial in their operands at that offset
_PASS = frozenset({"NEG", "CAST", "STOP_GRAD", "RENAME", "CHUNK", "PERMUTE", "SHIFT", "SHARD",
                   "ALL_GATHER", "ALL_TO_ALL", "BROADCAST", "REDUCE_SCATTER", "PART"})
# functions of one row only: allowed on unsummed values; value at the zero row
_VANISH_AT_0 = frozenset({"RECIP", "LOG", "SQRT", "RSQRT", "TANH", "SILU", "GELU"})
_NOT_TOTAL = frozenset({"RECIP", "LOG", "SQRT", "RSQRT"})


ORDERED_KINDS = frozenset({"index"})


def size_kinds(op: str, attrs: tuple[Any, ...]) -> list[tuple[str, str]]:
    """``(dim, kind)`` for each dim whose size or positions the op reads: ``index`` (positions
    that values are compared with, or that become values: ONE_HOT, an index input's range,
    CAUSAL_MASK, whose counts a plan may use as indices), ``rope seq``, ``rope half``, ``topk``,
    ``shift``, ``size`` (DIM_SIZE). Dims sharing a kind keep their equality under reduction, and
    their order when the kind is ordered (docs/soundness.md, Rule L)."""
    if op == "DIM_SIZE":
        return [(attrs[0], "size")]
    if op == "CAUSAL_MASK":
        return [(attrs[0], "index"), (attrs[1], "index")]
    if op in ("ROPE_COS", "ROPE_SIN"):
        return [(attrs[0], "rope seq"), (attrs[1], "rope half")]
    if op == "ONE_HOT":
        return [(attrs[0], "index")]
    if op in ("TOPK_MASK", "SHIFT"):
        return [(attrs[0], op.split("_")[0].lower())]
    if op == "INPUT" and len(attrs) > 3:
        return [(attrs[3], "index")]
    return []


def related_alike(kinds_a: frozenset[str], kinds_b: frozenset[str], ra: int, rb: int,
                  sa: int, sb: int) -> bool:
    """Do reduced sizes ``sa, sb`` keep the relation of real sizes ``ra, rb`` that Rule L needs:
    dims that play a common role (share a kind) keep their equality, and their order when the
    role is ordered (``index``)."""
    common = kinds_a & kinds_b
    if common and (ra == rb) != (sa == sb):
        return False
    return not (common & ORDERED_KINDS) or (ra < rb) == (sa < sb)


class AdmissibilityError(ValueError):
    """The nodes cannot be analysed at this binding (a dim without a size, a non-dividing shard)."""


@dataclass(frozen=True)
class SizeClass:
    """One size class of dims (linked by ``RENAME``) and what the theorem allows for it.

    Attributes:
        dims: member dim names, sorted.
        unit: ``U_c``, the gcd of every block size of the members at the real sizes (elements).
        fixed: why the class must keep its real sizes (the dim and the op, in the user's words),
            or ``None`` when it may be reduced.
        weight: ``W_c``, an upper bound on the number of power sums multiplied together (0: no
            sum over the class).
        carried: a root has a dim of the class.
        total: every op applied to a value depending on the class is total (refutation rule).
        need: offsets per unit a proof needs, ``max(1, W_c + carried)`` (``W_c`` when not carried).
    """

    dims: tuple[str, ...]
    unit: int
    fixed: str | None
    weight: int
    carried: bool
    total: bool

    @property
    def need(self) -> int:
        return max(1, self.weight + (1 if self.carried else 0))

    @property
    def refutable_reduced(self) -> str | None:
        """``None`` when a divergence at any ``1 <= m <= U_c`` is one at the real size, else why
        not."""
        if self.fixed is not None:
            return self.fixed
        if self.weight and not self.total:
            return (f"dim {self.dims[0]} is summed and a value depending on it goes through a "
                    f"partial function (RECIP/LOG/SQRT/RSQRT), so zero rows cannot pad a witness")
        return None


@dataclass(frozen=True)
class Admissibility:
    """The size classes of a pair of terms at a real binding (:func:`analyse`)."""

    classes: tuple[SizeClass, ...]
    suspects: Mapping[str, str] = field(default_factory=dict)   # dim -> literal (Rule L)
    dependent: Mapping[str, frozenset[str]] = field(default_factory=dict)   # dim -> its kinds

    def of(self, dim: str) -> SizeClass | None:
        for c in self.classes:
            if dim in c.dims:
                return c
        return None

    def fixed_reasons(self) -> list[str]:
        return [c.fixed for c in self.classes if c.fixed is not None]


# ---------------------------------------------------------------------------------------------
def _rational(x: Any) -> Fraction | None:
    if isinstance(x, bool):
        return None
    if isinstance(x, (int, Fraction)):
        return Fraction(x)
    if getattr(x, "is_Rational", False):
        return Fraction(int(x.p), int(x.q))
    return None


def _axis(binding: Mapping[str, int], a: str) -> int:
    if a.startswith("#"):
        try:
            parts = int(a.split("/")[1])
        except (IndexError, ValueError):
            raise AdmissibilityError(f"bad chunk marker {a!r}") from None
        return parts
    if a not in binding:
        raise AdmissibilityError(f"mesh axis {a!r} has no size in the binding")
    return int(binding[a])


def _reachable(nodes: Sequence[Any], roots: Sequence[int]) -> list[int]:
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        i = stack.pop()
        if i not in seen:
            seen.add(i)
            stack.extend(nodes[i][1])
    return sorted(seen)   # a node table is topologically ordered: children first


class _Classes:
    """Union-find over dim names."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, n: str) -> str:
        self.parent.setdefault(n, n)
        while self.parent[n] != n:
            self.parent[n] = self.parent[self.parent[n]]
            n = self.parent[n]
        return n

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def _dim_refs(op: str, attrs: tuple[Any, ...], dims: Any) -> list[str]:
    """Every dim name a node mentions (its dims and the dims its attrs name)."""
    out = [n for n, _ in dims]
    if op in ("DIM_SIZE", "ONE_HOT", "TOPK_MASK", "SHIFT", "PERMUTE") and attrs:
        out.append(attrs[0])
    elif op == "INPUT" and len(attrs) > 3:
        out.append(attrs[3])
    elif op in ("CAUSAL_MASK", "ROPE_COS", "ROPE_SIN", "RENAME"):
        out += [attrs[0], attrs[1]]
    elif op == "REDUCE_MAX":
        out += list(attrs[0])
    return [n for n in out if isinstance(n, str)]


def analyse(nodes: Sequence[Any], roots: Sequence[int], binding: Mapping[str, int]
            ) -> Admissibility:
    """The size classes of the terms below ``roots`` and what the theorem allows for each.

    Args:
        nodes: kernel node rows ``(op, args, attrs, dims)``, children before parents
            (``NodeTable.nodes``).
        roots: node ids of the two sides (or of any set of terms judged together).
        binding: the *real* sizes of every dim and mesh axis.

    Returns:
        an :class:`Admissibility`; classes are sorted by their first dim name.

    Raises:
        AdmissibilityError: a dim or axis without a size, or a block that does not divide.
    """
    order = _reachable(nodes, roots)
    uf = _Classes()
    for i in order:
        op, args, attrs, dims = nodes[i]
        for n in _dim_refs(op, attrs, dims):
            uf.find(n)
        if op == "RENAME":
            uf.union(attrs[0], attrs[1])
    names = [n for n in uf.parent if n not in MESH_AXES]
    for n in names:
        if n not in binding:
            raise AdmissibilityError(f"dim {n} has no size in the binding")
    cls = {n: uf.find(n) for n in names}
    blocks: dict[str, int] = {}
    fixed: dict[str, str] = {}
    dependent: dict[str, set[str]] = {}

    def fix(d: str, why: str) -> None:
        fixed.setdefault(cls[d], f"dim {d} keeps its real size {binding[d]}: {why}")

    def block(name: str, shards: Any, extra: int = 1) -> None:
        p = extra
        for a in shards:
            p *= _axis(binding, a)
        n = int(binding[name])
        if n % p:
            raise AdmissibilityError(f"dim {name} (size {n}) does not divide over "
                                     f"{list(shards)} x {extra}")
        c = cls[name]
        blocks[c] = math.gcd(blocks.get(c, 0), n // p)

    for i in order:
        op, args, attrs, dims = nodes[i]
        for n, s in dims:
            block(n, s)
        if op == "PERMUTE":
            d = dict(dims)[attrs[0]]
            block(attrs[0], d, len(attrs[1]))
        # position- and size-dependent ops
        for d, kind in size_kinds(op, attrs):
            dependent.setdefault(d, set()).add(kind)
        if op == "DIM_SIZE":
            fix(attrs[0], f"DIM_SIZE({attrs[0]}) is its size")
        elif op == "CAUSAL_MASK":
            for d in attrs[:2]:
                fix(d, f"CAUSAL_MASK({attrs[0]}, {attrs[1]}) depends on positions")
        elif op in ("ROPE_COS", "ROPE_SIN"):
            for d in attrs[:2]:
                fix(d, f"{op}({attrs[0]}, {attrs[1]}) depends on positions and on |{attrs[1]}|")
        elif op == "ONE_HOT":
            fix(attrs[0], f"ONE_HOT over {attrs[0]} compares indices with positions")
        elif op == "TOPK_MASK":
            fix(attrs[0], f"TOPK_MASK along {attrs[0]} selects {attrs[1]} of |{attrs[0]}|")
        elif op == "SHIFT":
            fix(attrs[0], f"SHIFT along {attrs[0]} moves by one position")
        elif op == "REDUCE_MAX":
            for d in attrs[0]:
                fix(d, f"REDUCE_MAX over {d} is a max over positions, not a sum")
        elif op == "INPUT" and len(attrs) > 3:
            fix(attrs[3], f"input {attrs[0]} holds indices in [0, |{attrs[3]}|)")
        # a node carrying two dims of one class couples two offsets (an EINSUM: in its product)
        carried_here = [n for n, _ in dims] + ([n for a in args for n, _ in nodes[a][3]]
                                              if op == "EINSUM" else [])
        seen: dict[str, str] = {}
        for n in carried_here:
            if n in cls and seen.setdefault(cls[n], n) != n:
                fix(n, f"{op} has dims {seen[cls[n]]} and {n} of one size class (linked by "
                       f"RENAME), which couples two positions")
    w_root, total = _power_sums(nodes, order, roots, cls, fixed, binding)
    carried = {cls[n] for r in roots for n, _ in nodes[r][3] if n in cls}
    members: dict[str, list[str]] = {}
    for n in names:
        members.setdefault(cls[n], []).append(n)
    out = []
    for c, ms in members.items():
        unit = blocks.get(c) or math.gcd(*(int(binding[n]) for n in ms))
        out.append(SizeClass(tuple(sorted(ms)), unit, fixed.get(c), w_root.get(c, 0),
                             c in carried, total.get(c, True)))
    suspects = literal_suspects(nodes, order, binding, names,
                                [a for a in MESH_AXES if a in binding])
    return Admissibility(tuple(sorted(out, key=lambda x: x.dims)), suspects,
                         {d: frozenset(k) for d, k in dependent.items()})


def _power_sums(nodes: Sequence[Any], order: list[int], roots: Sequence[int],
                cls: Mapping[str, str], fixed: dict[str, str], binding: Mapping[str, int]
                ) -> tuple[dict[str, int], dict[str, bool]]:
    """Theorem B's conditions, one pass over the nodes for every class at once.

    Per node and class ``c`` it depends on: ``w`` (power sums multiplied together, an upper
    bound) and ``z`` (every coefficient vanishes on the zero row: the class's inputs 0, positive
    inputs 1, PART addends 0; partial functions read as 0 at 0, as z3's semantics allows).
    Adds a reason to ``fixed`` for every class that fails; returns ``(W per class: the largest
    w at a root, total per class)``.
    """
    zero: dict[int, bool] = {}      # the node is identically 0 (class-independent)
    state: dict[int, dict[str, tuple[int, bool]]] = {}
    total: dict[str, bool] = {}

    def fail(c: str, d: str, why: str) -> None:
        fixed.setdefault(c, f"dim {d} keeps its real size {binding[d]}: {why}")

    def name_of(c: str) -> str:
        return next(n for n in sorted(cls) if cls[n] == c)

    for i in order:
        op, args, attrs, dims = nodes[i]
        kids = [state[a] for a in args]
        mine = {cls[n] for n, _ in dims if n in cls}
        deps = set().union(*kids) if kids else set()
        if op == "INPUT":
            deps = set(mine)
        elif op == "PART":
            deps |= mine
        if op == "CONST":
            v = _rational(attrs[0]) if attrs else None
            zero[i] = v == 0
        elif op in ("ADD", "CONCAT", "MAXIMUM", "ALL_REDUCE") or (op in _PASS and op != "PART"):
            zero[i] = bool(args) and all(zero[a] for a in args)
        elif op in ("MUL", "EINSUM"):
            zero[i] = any(zero[a] for a in args)
        else:
            zero[i] = False
        st: dict[str, tuple[int, bool]] = {}
        for c in deps:
            if c in fixed:
                continue

            def get(a: int) -> tuple[int, bool]:
                return state[a].get(c, (0, zero[a]))
            ws = [get(a) for a in args]
            w, z = _step(op, attrs, dims, ws, c, cls, args, nodes)
            if w is None:          # a non-polynomial op takes a summed value
                fail(c, name_of(c), f"{op} of a value summed over {name_of(c)} (Theorem B needs "
                                    f"a polynomial in the sums)")
                continue
            if w == -1:            # a contraction whose summand does not vanish on the zero row
                fail(c, name_of(c), f"EINSUM sums over {name_of(c)} a term with no factor "
                                    f"indexed by it (a count |{name_of(c)}|)")
                continue
            if op in _NOT_TOTAL or (op == "POW" and not _natural(attrs[0])):
                total[c] = False
            st[c] = (w, z)
        state[i] = st
    w_root: dict[str, int] = {}
    for r in roots:
        for c, (w, _) in state[r].items():
            w_root[c] = max(w_root.get(c, 0), w)
    return w_root, total


def _natural(p: Any) -> bool:
    q = _rational(p)
    return q is not None and q.denominator == 1 and q >= 0


def _step(op: str, attrs: tuple[Any, ...], dims: Any, ws: list[tuple[int, bool]], c: str,
          cls: Mapping[str, str], args: Sequence[int], nodes: Sequence[Any]
          ) -> tuple[int | None, bool]:
    """``(w, z)`` of one node for class ``c`` from its operands'; ``w`` None: a non-polynomial op
    on a summed value; ``w`` -1: a count."""
    if op in ("INPUT",):
        return 0, len(attrs) < 3 or attrs[2] != "positive"
    if op in ("ADD", "CONCAT", "ALL_REDUCE") and not (op == "ALL_REDUCE" and attrs[1] == "max"):
        return max((w for w, _ in ws), default=0), all(z for _, z in ws)
    if op in _PASS:
        return max((w for w, _ in ws), default=0), all(z for _, z in ws)
    if op == "MUL":
        return sum(w for w, _ in ws), any(z for _, z in ws)
    if op == "POW" and _natural(attrs[0]):
        k = int(_rational(attrs[0]))   # type: ignore[arg-type]
        return (ws[0][0] * k, ws[0][1]) if k else (0, False)
    if op == "EINSUM":
        w, z = sum(w for w, _ in ws), any(z for _, z in ws)
        inside = {cls[n] for a in args for n, _ in nodes[a][3] if n in cls}
        out = {cls[n] for n, _ in dims if n in cls}
        if c in inside and c not in out:      # contracts the class: a power sum
            return (w + 1, False) if z else (-1, False)
        return w, z
    # row-local (non-polynomial) ops: only on values not summed over the class
    if any(w for w, _ in ws):
        return None, False
    if op in _VANISH_AT_0 or op == "POW" or op in ("REDUCE_MAX", "ALL_REDUCE"):
        return 0, ws[0][1]
    if op == "MAXIMUM":
        return 0, ws[0][1] and ws[1][1]
    if op == "WHERE":
        return 0, (ws[1][1] and ws[2][1]) or (ws[0][1] and ws[2][1])
    return 0, False          # EXP, SIGMOID, ONE_HOT, TOPK_MASK, leaves


# ---------------------------------------------------------------------------------------------
def proof_binding(adm: Admissibility, real: Mapping[str, int]) -> dict[str, int]:
    """The binding a z3 query on these terms uses: each admissible class at ``need`` offsets per
    unit (never past its real size), every other dim and every mesh axis at its real size."""
    out = {k: int(v) for k, v in real.items()}
    for c in adm.classes:
        if c.fixed is None and c.need < c.unit:
            for d in c.dims:
                out[d] = int(real[d]) // c.unit * c.need
    return out


def refutation_binding_error(adm: Admissibility, real: Mapping[str, int],
                             b: Mapping[str, int]) -> str | None:
    """``None`` when a divergence of these terms at ``b`` (real mesh) is reported as one at the
    real sizes; otherwise the first reason it is not (:func:`refutation_problems`)."""
    probs = refutation_problems(adm, real, b)
    return probs[0][1] if probs else None


def refutation_problems(adm: Admissibility, real: Mapping[str, int], b: Mapping[str, int]
                        ) -> list[tuple[tuple[str, ...], str]]:
    """Why a divergence at ``b`` is not one at the real sizes: ``(dims to put back to their
    real sizes, reason)`` per problem; empty when it is.

    Every class whose sizes differ from the real ones must be scaled together (``m / U`` with
    ``1 <= m <= U``) and allowed either by Corollary C (admissible; only total ops if summed) or
    by Rule L: no literal of the terms may encode a size of it (:mod:`proofs.size_literals`), and
    the size-dependent dims keep their equality relations, and their order where they share an
    ordered kind (:func:`related_alike`, ``docs/soundness.md``). Mesh axes must be real."""
    out: list[tuple[tuple[str, ...], str]] = []
    for ax in MESH_AXES:
        if ax in real and b.get(ax) != real[ax]:
            out.append(((), f"mesh axis {ax} has size {b.get(ax)}, the plan {real[ax]}"))
    dep = sorted(adm.dependent)
    for i, x in enumerate(dep):
        for y in dep[i + 1:]:
            rx, ry, sx, sy = real[x], real[y], b.get(x, 0), b.get(y, 0)
            if not related_alike(adm.dependent[x], adm.dependent[y], rx, ry, sx, sy):
                back = tuple(d for d in (x, y) if b.get(d) != real[d])
                out.append((back, f"dims {x} and {y} (read by position- or size-dependent "
                                  f"ops) are {rx} and {ry}, replayed at {sx} and {sy}: their "
                                  f"relation changes"))
    for c in adm.classes:
        if all(b.get(d) == real[d] for d in c.dims):
            continue
        d0 = next(d for d in c.dims if b.get(d) != real[d])
        ms = set()
        for d in c.dims:
            v = b.get(d)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1 or \
                    (v * c.unit) % int(real[d]):
                ms.add(0)
                break
            ms.add(v * c.unit // int(real[d]))
        if len(ms) != 1 or not 1 <= next(iter(ms)) <= c.unit:
            out.append((c.dims, f"dims {', '.join(f'{d}={b.get(d)}' for d in c.dims)} are not "
                                f"their real sizes scaled together by m/{c.unit} (one size "
                                f"class)"))
        elif c.refutable_reduced is not None:          # not Corollary C: Rule L
            lit = next((adm.suspects[d] for d in c.dims if d in adm.suspects), None)
            if lit is not None:
                out.append((c.dims, f"{lit} (replayed at {d0}={b.get(d0)}, real {real[d0]})"))
    return out


# -- the two checks a certificate's checker makes (proofs/checker.py) ----------------------------
def smt_binding_error(nodes: Sequence[Any], lhs: int, rhs: int, real: Mapping[str, int],
                      recorded: Mapping[str, int], assumptions: Sequence[str]) -> str | None:
    """Why an ``smt`` step's recorded binding is not the one the theorem allows for its two
    terms (recomputed, never taken from the certificate), or why it lacks the assumption; ``None``
    when it is right."""
    try:
        want = proof_binding(analyse(nodes, [lhs, rhs], real), real)
    except AdmissibilityError as e:
        return str(e)
    if dict(recorded) != want:
        diff = sorted(k for k in set(recorded) | set(want) if recorded.get(k) != want.get(k))
        return (f"the query's binding gives {', '.join(f'{k}={recorded.get(k)}' for k in diff[:3])}"
                f" but the shape-reduction theorem allows "
                f"{', '.join(f'{k}={want.get(k)}' for k in diff[:3])} for these terms")
    if want != dict(real) and ASSUMPTION not in assumptions:
        return f"a query at reduced sizes without the assumption '{ASSUMPTION[:40]}...'"
    return None


def replay_error(nodes: Sequence[Any], pairs: Sequence[tuple[str, int, int]],
                 real: Mapping[str, int], b: Mapping[str, int]) -> str | None:
    """Why a NOT EQUIVALENT replay at ``b`` of the refuted ``(name, expected, actual)`` pairs is
    not a divergence at the real sizes (the first pair that fails), or ``None``. The pairs are
    judged together first: the joint conditions are stricter than each pair's (coarser classes,
    more literals and relations), so a joint pass is a pass for each."""
    def rule(ps: Sequence[tuple[str, int, int]]) -> str | None:
        try:
            return refutation_binding_error(
                analyse(nodes, [x for _, e, a in ps for x in (e, a)], real), real, b)
        except AdmissibilityError as e:
            return str(e)

    if rule(pairs) is None:
        return None
    for p in pairs:
        err = rule([p])
        if err is not None:
            return f"goal {p[0]}: {err}"
    return None
