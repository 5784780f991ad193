"""The checker's own sign and definedness facts over certificate nodes (issue 10, family 3).

A rule step that merges or drops a power (``x^-1 * x -> 1``, ``(x^-1)^-1 -> x``, a zero
coefficient ``x^-1 - x^-1 -> 0``) is a proof only where both sides are defined at the same inputs
of the spec's domain; ``cas`` and ``smt`` steps likewise. This module recomputes, from the node
table alone, what the producer's ``rewriting/signs.py`` states (written separately: the checker
imports nothing from ``rewriting``):

* ``sign(i)``: a subset of ``{-, 0, +}`` (bits ``NEG | ZERO | POS``) holding the sign of every
  element of node ``i`` where it is defined, from the declared input domains (``positive``
  ``+``; ``mask``, ``index`` ``{0, +}``; a whole ``mask`` input summed over all its dims times
  positive terms is ``+``: the domain says the batch has a token), constants, ``exp`` /
  ``sigmoid`` ``+``, products, sums, powers and movement ops (the full list is in
  ``rewriting/signs.py``'s docstring; the two must agree, a test compares them on every rule
  instance);
* ``defined(i)``: every ``POW`` / ``RECIP`` / ``SQRT`` / ``RSQRT`` / ``LOG`` below ``i`` has an
  argument whose sign set lies in the op's requirement (integer ``e < 0``: nonzero; fractional
  ``e > 0``: ``>= 0``; fractional ``e < 0`` and ``LOG``: ``> 0``);
* ``assumed``: spec denominators (their normal forms) that the spec's domain makes nonzero or
  positive. The checker accepts such a node only after verifying it itself
  (:func:`assumed_denominators`): it is the normal form, by a proof that uses no assumption, of
  the argument of a partial op in an obligation's expected (spec) term without ``cut:``
  variables. Factors of an assumed nonzero product are nonzero (a product of defined factors is
  0 only if a factor is).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any

from proofs.kernel import NodeTable

__all__ = ["NEG", "ZERO", "POS", "ANY", "NONZERO", "NONNEG", "Signs", "requirement",
           "partial_arg", "DenominatorError", "assumed_denominators"]

NEG, ZERO, POS = 1, 2, 4
ANY = NEG | ZERO | POS
NONZERO = NEG | POS
NONNEG = ZERO | POS
_VAL = ((NEG, -1), (ZERO, 0), (POS, 1))
_BIT = {-1: NEG, 0: ZERO, 1: POS}
REQUIREMENTS = {"nonzero": NONZERO, "positive": POS, "nonnegative": NONNEG}


class DenominatorError(ValueError):
    """A certificate's list of assumed spec denominators does not check."""


def requirement(e: Any) -> int:
    """Signs of ``x`` at which ``x^e`` is defined."""
    e = Fraction(e)
    if e.denominator == 1:
        return ANY if e >= 0 else NONZERO
    return NONNEG if e > 0 else POS


def _exponent(op: str, attrs: tuple[Any, ...]) -> Fraction | None:
    if op == "POW":
        try:
            return Fraction(attrs[0])
        except (TypeError, ValueError):
            return None
    return {"RECIP": Fraction(-1), "SQRT": Fraction(1, 2), "RSQRT": Fraction(-1, 2)}.get(op)


def partial_arg(table: NodeTable, i: int) -> tuple[int, int] | None:
    """``(argument, requirement)`` when node ``i`` is a partial op (a power that needs a sign of
    its argument, or ``LOG``), else None."""
    op, args, attrs, _ = table.nodes[i]
    if op == "LOG":
        return args[0], POS
    if op == "POW" and _exponent(op, attrs) is None:
        return args[0], POS           # an exponent the checker cannot read: as strict as any
    e = _exponent(op, attrs)
    if e is None or requirement(e) == ANY:
        return None
    return args[0], requirement(e)


def _combine(a: int, b: int, f) -> int:
    out = 0
    for x, vx in _VAL:
        if a & x:
            for y, vy in _VAL:
                if b & y:
                    out |= f(vx, vy)
    return out


def _mul(a: int, b: int) -> int:
    return _combine(a, b, lambda x, y: _BIT[x * y])


def _add(a: int, b: int) -> int:
    return _combine(a, b, lambda x, y: ANY if x * y < 0 else _BIT[(x + y > 0) - (x + y < 0)])


def _max(a: int, b: int) -> int:
    return _combine(a, b, lambda x, y: _BIT[max(x, y)])


def _sum_of_copies(s: int) -> int:
    out = s
    while (nxt := out | _add(out, s)) != out:
        out = nxt
    return out


def _pow(s: int, e: Fraction) -> int:
    if e == 0:           # x^0 = 1, also at x = 0 (found formalising issue 17: it was "0")
        return POS if s else 0
    r = requirement(e)
    out = ZERO if s & r & ZERO else 0
    out |= POS if s & r & POS else 0
    if s & r & NEG:
        out |= POS if e.numerator % 2 == 0 else NEG
    return out


def _const(v: Any) -> int:
    if isinstance(v, bool):
        return ANY
    if isinstance(v, int | Fraction):
        return POS if v > 0 else NEG if v < 0 else ZERO
    for attr, bit in (("is_zero", ZERO), ("is_positive", POS), ("is_negative", NEG)):
        if getattr(v, attr, None) is True:
            return bit
    return ANY


_SAME = frozenset({"TANH", "SILU", "GELU", "CAST", "STOP_GRAD", "RENAME", "CHUNK", "PERMUTE",
                   "SHARD", "BROADCAST", "ALL_GATHER", "ALL_TO_ALL", "REDUCE_MAX"})
_INDICATOR = frozenset({"ONE_HOT", "CAUSAL_MASK", "TOPK_MASK"})
_DOMAIN = {"positive": POS, "mask": NONNEG, "index": NONNEG}


class Signs:
    """Sign sets and definedness of the nodes of ``table`` (lazy, memoised, iterative)."""

    def __init__(self, table: NodeTable, assumed: Mapping[int, int] | None = None):
        self.t = table
        self.assumed = dict(assumed or {})
        self._sign: dict[int, int] = {}
        self._ok: dict[int, bool] = {}

    def sign(self, i: int) -> int:
        if i not in self._sign:
            self._run(i)
        return self._sign[i]

    def defined(self, i: int) -> bool:
        if i not in self._ok:
            self._run(i)
        return self._ok[i]

    def same_definedness(self, x: int, left: int, right: int | None) -> bool:
        """Base ``x`` needing signs ``left`` on one side and ``right`` on the other (None:
        absent there) is defined at the same inputs on both sides."""
        s = self.sign(x)
        if right is None:
            return self.defined(x) and not s & ~left
        return s & left == s & right

    def settled(self, root: int) -> bool:
        """Every partial op below ``root`` has an argument the facts make fit (so ``root`` is
        defined on the whole domain)."""
        return self.defined(root)

    def _run(self, root: int) -> None:
        nodes = self.t.nodes
        stack = [root]
        while stack:
            i = stack[-1]
            if i in self._sign:
                stack.pop()
                continue
            todo = [c for c in nodes[i][1] if c not in self._sign]
            if todo:
                stack.extend(todo)
                continue
            stack.pop()
            s, ok = self._node(i)
            allowed = self.assumed.get(i)
            if allowed is not None:
                s, ok = (s & allowed) or allowed, True
            self._sign[i], self._ok[i] = s, ok

    def _node(self, i: int) -> tuple[int, bool]:  # noqa: C901, PLR0911, PLR0912 -- one case per op
        op, args, attrs, _ = self.t.nodes[i]
        a = [self._sign[c] for c in args]
        ok = all(self._ok[c] for c in args)
        if op in ("POW", "RECIP", "SQRT", "RSQRT"):
            e = _exponent(op, attrs)
            if e is None:
                return ANY, False
            return _pow(a[0], e), ok and not a[0] & ~requirement(e)
        if op == "LOG":
            return ANY, ok and not a[0] & ~POS
        if op == "CONST":
            return _const(attrs[0]), True
        if op in ("DIM_SIZE", "AXIS_SIZE"):
            return POS, True
        if op == "RANK_CONST":
            s = 0
            for v in attrs[1]:
                s |= _const(v)
            return s or ANY, True
        if op == "INPUT":
            return _DOMAIN.get(attrs[2] if len(attrs) > 2 else None, ANY), True
        if op in ("EXP", "SIGMOID"):
            return POS, ok
        if op == "NEG":
            return (a[0] & ZERO) | (POS if a[0] & NEG else 0) | (NEG if a[0] & POS else 0), ok
        if op == "MUL":
            return self._product(args), ok
        if op == "ADD":
            s = a[0]
            for x in a[1:]:
                s = _add(s, x)
            return s, ok
        if op == "MAXIMUM":
            return _max(a[0], a[1]), ok
        if op == "WHERE":
            return a[1] | a[2], ok
        if op == "CONCAT":
            s = 0
            for x in a:
                s |= x
            return s, ok
        if op == "SHIFT":
            return a[0] | ZERO, ok
        if op == "EINSUM":
            return self._einsum(args, attrs), ok
        if op == "ALL_REDUCE":
            return (_sum_of_copies(a[0]) if attrs[1] == "sum" else a[0]), ok
        if op == "REDUCE_SCATTER":
            return _sum_of_copies(a[0]), ok
        if op in _SAME:
            return a[0], ok
        if op in _INDICATOR:
            return NONNEG, ok
        return ANY, ok

    def _product(self, args: tuple[int, ...]) -> int:
        count: dict[int, int] = {}
        for c in args:
            count[c] = count.get(c, 0) + 1
        s = POS
        for c, m in count.items():   # a repeated factor is a power: x * x >= 0
            s = _mul(s, _pow(self._sign[c], Fraction(m)))
        return s

    def _einsum(self, args: tuple[int, ...], attrs: tuple[Any, ...]) -> int:
        nodes = self.t.nodes
        out = set(attrs[0])
        prod = self._product(args)
        summed = {n for c in args for n, _ in nodes[c][3]} - out
        if not summed:
            return prod
        factors, stack = [], list(args)   # MUL operands spliced
        while stack:
            c = stack.pop()
            if nodes[c][0] == "MUL":
                stack.extend(nodes[c][1])
            else:
                factors.append(c)
        rest = [c for c in factors if self._sign[c] != POS]
        if len(rest) == 1:
            c = rest[0]
            while nodes[c][0] == "EINSUM" and len(nodes[c][1]) == 1:   # a partial sum of it
                c = nodes[c][1][0]
            op, _, at, dims = nodes[c]
            whole_mask = (op == "INPUT" and len(at) > 2 and at[2] == "mask" and bool(dims)
                          and all(not sh and n not in out for n, sh in dims))
            if whole_mask or self._covering(c, summed):
                return POS
        return _sum_of_copies(prod)

    def _covering(self, c: int, summed: set[str]) -> bool:
        """A 0/1 table with a 1 in every row along a summed, unsharded dim (CAUSAL_MASK's
        diagonal, ONE_HOT of an index input over its range, TOPK_MASK with k >= 1); its other
        dims may be sliced (SHARD / CHUNK select rows), any dim permuted; a one-operand EINSUM (a
        sum of such a table over other, nonempty dims) is seen through."""
        nodes = self.t.nodes
        rows = ("SHARD", "CHUNK", "PERMUTE")
        sliced: set[str] = set()   # a slice selects rows: fine along any dim but the covering one
        while nodes[c][0] in ("SHARD", "CHUNK", "PERMUTE", "STOP_GRAD", "CAST") \
                or (nodes[c][0] == "EINSUM" and len(nodes[c][1]) == 1):   # a partial sum of it
            if nodes[c][0] in ("SHARD", "CHUNK"):
                sliced.add(nodes[c][2][0])
            c = nodes[c][1][0]
        op, args, at, dims = nodes[c]
        spec = dict(dims)
        summed = summed - sliced
        if op == "CAUSAL_MASK":
            return at[0] in summed or at[1] in summed
        if op == "ONE_HOT":
            i = args[0]
            while nodes[i][0] in rows:
                i = nodes[i][1][0]
            iop, _, iat, _ = nodes[i]
            return (at[0] in summed and not spec.get(at[0]) and iop == "INPUT" and len(iat) > 3
                    and iat[2] == "index" and iat[3] == at[0])
        if op == "TOPK_MASK":
            k = at[1] if len(at) > 1 else 0
            return (at[0] in summed and not spec.get(at[0]) and isinstance(k, int)
                    and not isinstance(k, bool) and k >= 1
                    and (len(args) == 1 or self._covering(args[1], {at[0]})))
        return False


# -- guards -------------------------------------------------------------------------------------
def powers(table: NodeTable, xs: Iterable[int]) -> dict[int, int]:
    """``{base: requirement}`` of the factors of ``MUL(xs)`` (nested MULs flattened, constants
    skipped, ``POW(x, e)`` read as ``x^e``)."""
    out: dict[int, int] = {}
    stack = list(xs)
    while stack:
        x = stack.pop()
        op, args, attrs, _ = table.nodes[x]
        if op == "MUL":
            stack.extend(args)
            continue
        if op == "CONST":
            continue
        if op == "POW":
            e = _exponent(op, attrs)
            base, r = args[0], (requirement(e) if e is not None else 0)
        else:
            base, r = x, ANY
        out[base] = out.get(base, ANY) & r
    return out


def product_keeps_definedness(signs: Signs, xs: Sequence[int], ys: Sequence[int]) -> bool:
    """``MUL(xs) -> MUL(ys)``: every base defined at the same inputs on both sides."""
    left, right = powers(signs.t, xs), powers(signs.t, ys)
    for x, r in left.items():
        if not signs.same_definedness(x, r, right.get(x)):
            return False
    return all(x in left or signs.defined(x) for x in right)


def pow_pow_keeps_definedness(signs: Signs, x: int, a: Fraction, b: Fraction) -> bool:
    """``(x^a)^b -> x^(ab)``: defined at the same inputs on both sides."""
    left = 0
    for s, _ in _VAL:
        if s & requirement(a) and not _pow(s, a) & ~requirement(b):
            left |= s
    return signs.same_definedness(x, left, requirement(a * b))


# -- assumed spec denominators ------------------------------------------------------------------
def _spec_partials(table: NodeTable, roots: Iterable[int]) -> dict[int, int]:
    """``{argument: requirement}`` of every partial op below ``roots`` (the strictest one)."""
    out: dict[int, int] = {}
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        i = stack.pop()
        if i in seen:
            continue
        seen.add(i)
        p = partial_arg(table, i)
        if p is not None:
            out[p[0]] = out.get(p[0], ANY) & p[1]
        stack.extend(table.nodes[i][1])
    return out


def assumed_denominators(table: NodeTable, entries: Any, spec_roots: Sequence[int],
                         steps: Sequence[Mapping[str, Any]]) -> tuple[dict[int, int], set[int]]:
    """Check a certificate's ``denominators`` and return ``({node: allowed signs}, proof steps)``.

    Each entry ``{"spec": d, "requirement": r, "nf": n, "proof": s}`` must name the argument
    ``d`` of a partial op (``RECIP``, a negative or fractional ``POW``, ``RSQRT``, ``SQRT``,
    ``LOG``) below ``spec_roots`` (the expected terms of obligations without ``cut:``
    variables), with ``r`` no stronger than that op needs, and a step ``s`` proving
    ``d == n``. The returned step ids (with every step they use) must then check *without* the
    assumptions (the caller replays them so). Factors of an assumed nonzero product, and bases of
    its powers, are added as nonzero.

    Raises:
        DenominatorError: naming the first entry that does not check.
    """
    if entries is None:
        return {}, set()
    if not isinstance(entries, list):
        raise DenominatorError("denominators is not a list")
    need = _spec_partials(table, spec_roots)
    out: dict[int, int] = {}
    proofs: set[int] = set()
    for k, en in enumerate(entries):
        w = f"denominator {k}"
        if not isinstance(en, dict) or set(en) - {"spec", "requirement", "nf", "proof", "text"} \
                or not {"spec", "requirement", "nf", "proof"} <= set(en):
            raise DenominatorError(f"{w} is not {{spec, requirement, nf, proof[, text]}}")
        d, n, s, r = en["spec"], en["nf"], en["proof"], REQUIREMENTS.get(en["requirement"])
        for name, v, hi in (("spec", d, len(table)), ("nf", n, len(table)), ("proof", s, len(steps))):
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < hi:
                raise DenominatorError(f"{w}: {name} {v!r} is not a node/step id")
        if r is None:
            raise DenominatorError(f"{w}: requirement {en['requirement']!r} is not one of "
                                   f"{sorted(REQUIREMENTS)}")
        if d not in need:
            raise DenominatorError(f"{w}: node {d} is not the argument of a RECIP / POW / RSQRT "
                                   f"/ SQRT / LOG in a spec term without cut variables")
        if need[d] & ~r:   # the spec's op at d does not imply the claim
            raise DenominatorError(f"{w}: the spec's op at node {d} does not make it "
                                   f"{en['requirement']}")
        r = need[d]
        st = steps[s]
        if not isinstance(st, dict) or (st.get("lhs"), st.get("rhs")) != (d, n):
            raise DenominatorError(f"{w}: step {s} does not prove node {d} == node {n}")
        out[n] = out.get(n, ANY) & r
        out[d] = out.get(d, ANY) & r
        proofs.add(s)
    for n in list(out):           # factors of a nonzero product are nonzero
        if out[n] & ZERO:
            continue
        stack = [n]
        while stack:
            x = stack.pop()
            op, args, _, _ = table.nodes[x]
            if op == "MUL":
                stack.extend(c for c in args if table.nodes[c][0] != "CONST")
            elif op == "POW" and _exponent(op, table.nodes[x][2]) not in (None, 0):
                stack.append(args[0])
            elif x != n:
                out[x] = out.get(x, ANY) & NONZERO
    return out, proofs
