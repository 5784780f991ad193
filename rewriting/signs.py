"""Signs and definedness of terms on the spec's domain: when a denominator may be cancelled.

Issue 10, family 3. ``n^-1 * n = 1`` holds only where ``n != 0``; at ``n = 0`` the left side is
undefined (NaN in float64) and the right side is not. A rewrite that turns an undefined plan
value into a defined one proves a plan equal to its spec although the plan is NaN there (a
per-sequence token count that a fully padded sequence makes 0). So every step of a proof must
keep *definedness*: on the spec's domain ``D`` its two sides are defined at the same inputs.

**The domain D.** The inputs in their declared domains (``positive``: > 0; ``mask``: 0/1 with at
least one 1 over the whole tensor, i.e. the batch has a token; ``index``: integers >= 0;
``real``; ``cut:`` variables of obligation cutting are unconstrained reals) and, where the
prover lists them (:class:`Signs` ``assumed``), the spec's own denominators nonzero: the spec
is only defined where they are.

**Sign sets.** ``sign(t)`` is a subset of ``{-, 0, +}`` (bits ``NEG | ZERO | POS``) holding the
sign of every element of ``t`` at every input of ``D`` where ``t`` is defined. The rules, each a
fact of real arithmetic:

* ``CONST c``: the sign of ``c``; ``DIM_SIZE``, ``AXIS_SIZE``: ``+``; ``RANK_CONST``: the signs
  of its values; ``INPUT``: ``positive`` ``+``, ``mask`` / ``index`` ``{0, +}``, else any;
  ``ONE_HOT``, ``CAUSAL_MASK``, ``TOPK_MASK``: ``{0, +}``; RoPE tables, ``PART``: any;
* ``EXP``, ``SIGMOID``: ``+``; ``TANH``, ``SILU``, ``GELU``, ``CAST``, ``STOP_GRAD`` and the
  movement ops (``RENAME``, ``CHUNK``, ``PERMUTE``, ``SHARD``, ``BROADCAST``, ``ALL_GATHER``,
  ``ALL_TO_ALL``, ``ALL_REDUCE`` max, ``REDUCE_MAX``): the argument's sign set (``CONCAT``: the
  union; ``SHIFT`` adds ``0``); ``NEG`` swaps ``-`` and ``+``; ``LOG``: any;
* ``MUL``: the products of the operands' signs; ``ADD``: the sums (``+`` plus ``{0, +}`` is ``+``);
  ``MAXIMUM``: the larger sign; ``WHERE``: the union of its two branches;
* ``POW(x, e)``: ``x^e`` of each sign of ``x`` where it is defined (an even integer power of a
  nonzero sign is ``+``); ``RECIP``, ``SQRT``, ``RSQRT`` are the powers ``-1``, ``1/2``, ``-1/2``;
* ``EINSUM``: the product of the operands, summed over the contracted dims (a sum of one or more
  terms of one sign set: ``+`` stays ``+``, ``{0, +}`` stays ``{0, +}``); a factor repeated ``m``
  times (in ``MUL`` too) is its ``m``-th power (``x * x >= 0``). The sum is ``+`` when every
  operand but one is ``+`` and that one has a 1 in every summed row: a whole ``mask`` input all
  of whose dims are summed (the *mask total*: the mask has a 1), or a ``CAUSAL_MASK`` summed
  over one of its dims (the diagonal), ``ONE_HOT`` of an ``index`` input summed over its range,
  ``TOPK_MASK`` with ``k >= 1`` summed over its dim (an eligibility operand covering too), the
  summed dim whole (unsharded) and the other dims possibly sliced or permuted (rows selected). A per-sequence, per-rank
  (``SHARD``), per-micro-batch or per-chunk count is *not* a mask total;
* ``ALL_REDUCE`` sum, ``REDUCE_SCATTER``: a sum of one or more copies;
* an ``assumed`` term (a spec denominator's normal form) excludes ``0`` (``+`` for a radicand or
  a ``LOG`` argument) and is defined.

**Definedness.** ``defined(t)``: every ``POW``/``RECIP``/``SQRT``/``RSQRT``/``LOG`` in ``t`` has
an argument whose sign set lies in the op's *requirement* (:func:`requirement`): integer
``e < 0`` needs ``{-, +}``; non-integer ``e > 0`` needs ``{0, +}``, non-integer ``e < 0`` needs
``+`` (the reference evaluator's ``numpy.power`` is NaN for a negative base and a fractional
exponent); ``LOG`` needs ``+``.

**Guards** (used by ``mul-canon``, ``einsum-mul-canon``, ``add-canon``, ``pow-pow`` and, for
``cas``/``smt`` steps, by the prover): :func:`Signs.same_definedness` for a base kept on both
sides with requirements ``r_l`` (all its powers on the left) and ``r_r`` (its one power on the
right) holds when ``sign(x) & r_l == sign(x) & r_r``: every possible sign of ``x`` makes both
sides defined or both undefined. A base dropped from the right side (exponents summing to 0, a
zero coefficient, ``0 * x``) must be defined with ``sign(x)`` inside ``r_l``. The checker
(``proofs/checker_signs.py``) recomputes all of this with its own code from the certificate's
nodes.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from spec_lang.term import Binding, Op, Term

__all__ = ["NEG", "ZERO", "POS", "ANY", "NONZERO", "NONNEG", "Signs", "SignedBinding",
           "requirement", "CONTEXT_FREE", "signs_for", "product_keeps_definedness",
           "pow_pow_keeps_definedness", "iter_partial", "iter_partial_node", "assumed_closure"]

NEG, ZERO, POS = 1, 2, 4
ANY = NEG | ZERO | POS
NONZERO = NEG | POS
NONNEG = ZERO | POS
_BITS = (NEG, ZERO, POS)
_VAL = {NEG: -1, ZERO: 0, POS: 1}
_OF = {-1: NEG, 0: ZERO, 1: POS}


def requirement(e: Any) -> int:
    """Signs of ``x`` at which ``x^e`` is defined (``e`` an exact rational exponent)."""
    e = Fraction(e)
    if e.denominator == 1:
        return ANY if e >= 0 else NONZERO
    return NONNEG if e > 0 else POS


def _mul2(a: int, b: int) -> int:
    out = 0
    for x in _BITS:
        if a & x:
            for y in _BITS:
                if b & y:
                    out |= _OF[_VAL[x] * _VAL[y]]
    return out


def _add2(a: int, b: int) -> int:
    out = 0
    for x in _BITS:
        if a & x:
            for y in _BITS:
                if b & y:
                    s = _VAL[x] + _VAL[y]
                    # (-) + (+) can be anything; otherwise the sign of the sum is determined
                    out |= ANY if _VAL[x] * _VAL[y] < 0 else _OF[(s > 0) - (s < 0)]
    return out


def _sum_of_copies(s: int) -> int:
    """Signs of a sum of one or more terms each with a sign in ``s``."""
    out = s
    while True:
        nxt = out | _add2(out, s)
        if nxt == out:
            return out
        out = nxt


def _pow_sign(s: int, e: Fraction) -> int:
    if e == 0:                 # x^0 = 1, also at x = 0 (found formalising issue 17: it was "0")
        return POS if s else 0
    req = requirement(e)
    out = 0
    if s & req & ZERO:
        out |= ZERO            # e > 0 here (e < 0 excludes 0, e = 0 is above)
    if s & req & POS:
        out |= POS
    if s & req & NEG:          # integer e only
        out |= POS if e.numerator % 2 == 0 else NEG
    return out


def _max2(a: int, b: int) -> int:
    out = 0
    for x in _BITS:
        if a & x:
            for y in _BITS:
                if b & y:
                    out |= _OF[max(_VAL[x], _VAL[y])]
    return out


def _const_sign(v: Any) -> int:
    if isinstance(v, Fraction | int):
        return POS if v > 0 else NEG if v < 0 else ZERO
    try:  # a sympy number
        if v.is_zero:
            return ZERO
        if v.is_positive:
            return POS
        if v.is_negative:
            return NEG
    except AttributeError:
        pass
    return ANY


_SAME = frozenset({Op.TANH, Op.SILU, Op.GELU, Op.CAST, Op.STOP_GRAD, Op.RENAME, Op.CHUNK,
                   Op.PERMUTE, Op.SHARD, Op.BROADCAST, Op.ALL_GATHER, Op.ALL_TO_ALL, Op.REDUCE_MAX})
_INDICATOR = frozenset({Op.ONE_HOT, Op.CAUSAL_MASK, Op.TOPK_MASK})
_DOMAIN_SIGN = {"positive": POS, "mask": NONNEG, "index": NONNEG}


def _exponent(t: Term) -> Fraction | None:
    """The exponent of a partial power-like op (``None`` for total ops and ``LOG``)."""
    match t.op:
        case Op.POW:
            return Fraction(t.attrs[0])
        case Op.RECIP:
            return Fraction(-1)
        case Op.SQRT:
            return Fraction(1, 2)
        case Op.RSQRT:
            return Fraction(-1, 2)
    return None


def _is_mask_total_operand(x: Term, out: set[str]) -> bool:
    """``x`` summed to ``out`` is the whole mask's total: the mask itself, or a partial sum of
    it (one-operand EINSUMs: ``sum_S sum_B mask``), no dim of it sliced or kept in ``out``."""
    while x.op is Op.EINSUM and len(x.args) == 1:
        x = x.args[0]
    return (x.op is Op.INPUT and x.attrs[2] == "mask" and bool(x.dims)
            and all(not d.shards and d.name not in out for d in x.dims))


class Signs:
    """Sign sets and definedness of terms on ``D`` (module docstring), memoised per node.

    Args:
        assumed: ``{term: allowed}``: terms the spec's domain makes nonzero (``NONZERO``) or
            positive (``POS``): the normal forms of the spec's own denominators that the input
            domains do not already settle (the prover lists them with the verdict).
        mask_total: use the mask domain's "the batch has a token" (False: only arithmetic; the
            prover uses it to tell which spec denominators rest on that declaration).
        weak: memoise in weak dicts (a module-level instance must not keep terms alive).
    """

    def __init__(self, assumed: Mapping[Term, int] | None = None, *, mask_total: bool = True,
                 weak: bool = False):
        self.assumed: dict[Term, int] = dict(assumed or {})
        self.mask_total = mask_total
        # weak: a long-lived instance (CONTEXT_FREE) must not keep every term it saw alive
        self._sign: Any = weakref.WeakKeyDictionary() if weak else {}
        self._defined: Any = weakref.WeakKeyDictionary() if weak else {}

    # -- queries ----------------------------------------------------------------------------
    def sign(self, t: Term) -> int:
        got = self._sign.get(t)
        if got is None:
            self._run(t)
            got = self._sign[t]
        return got

    def defined(self, t: Term) -> bool:
        got = self._defined.get(t)
        if got is None:
            self._run(t)
            got = self._defined[t]
        return got

    def nonzero(self, t: Term) -> bool:
        return self.defined(t) and not self.sign(t) & ZERO

    def same_definedness(self, x: Term, left: int, right: int | None) -> bool:
        """A base ``x`` whose powers need ``left`` on one side and ``right`` on the other
        (``None``: ``x`` does not occur there) is defined at the same inputs on both sides."""
        s = self.sign(x)
        if right is None:
            return self.defined(x) and not s & ~left
        return s & left == s & right

    # -- the walk (explicit stack: terms are deep) ------------------------------------------
    def _run(self, root: Term) -> None:
        stack = [root]
        while stack:
            t = stack[-1]
            if t in self._sign:
                stack.pop()
                continue
            todo = [c for c in t.args if c not in self._sign]
            if todo:
                stack.extend(todo)
                continue
            stack.pop()
            s, ok = self._node(t)
            allowed = self.assumed.get(t)
            if allowed is not None:
                s, ok = (s & allowed) or allowed, True
            self._sign[t], self._defined[t] = s, ok

    def _node(self, t: Term) -> tuple[int, bool]:  # noqa: C901, PLR0911, PLR0912 -- one case per op
        sg = self._sign
        ok = all(self._defined[c] for c in t.args)
        a = [sg[c] for c in t.args]
        e = _exponent(t)
        if e is not None:
            return _pow_sign(a[0], e), ok and not a[0] & ~requirement(e)
        match t.op:
            case Op.CONST:
                return _const_sign(t.attrs[0]), True
            case Op.DIM_SIZE | Op.AXIS_SIZE:
                return POS, True
            case Op.RANK_CONST:
                s = 0
                for v in t.attrs[1]:
                    s |= _const_sign(v)
                return s or ANY, True
            case Op.INPUT:
                return _DOMAIN_SIGN.get(t.attrs[2], ANY), True
            case Op.LOG:
                return ANY, ok and not a[0] & ~POS
            case Op.EXP | Op.SIGMOID:
                return POS, ok
            case Op.NEG:
                return (a[0] & ZERO) | (POS if a[0] & NEG else 0) | (NEG if a[0] & POS else 0), ok
            case Op.MUL:
                return _product(t.args, sg), ok
            case Op.ADD:
                s = a[0]
                for x in a[1:]:
                    s = _add2(s, x)
                return s, ok
            case Op.MAXIMUM:
                return _max2(a[0], a[1]), ok
            case Op.WHERE:
                return a[1] | a[2], ok
            case Op.CONCAT:
                s = 0
                for x in a:
                    s |= x
                return s, ok
            case Op.SHIFT:
                return a[0] | ZERO, ok
            case Op.EINSUM:
                return self._einsum(t), ok
            case Op.ALL_REDUCE:
                return (_sum_of_copies(a[0]) if t.attrs[1] == "sum" else a[0]), ok
            case Op.REDUCE_SCATTER:
                return _sum_of_copies(a[0]), ok
            case op if op in _SAME:
                return a[0], ok
            case op if op in _INDICATOR:
                return NONNEG, ok
        return ANY, ok   # ROPE_COS / ROPE_SIN, PART, REGION: nothing known

    def _einsum(self, t: Term) -> int:
        out = set(t.attrs[0])
        prod = _product(t.args, self._sign)
        contracted = {d.name for x in t.args for d in x.dims} - out
        if not contracted:
            return prod
        factors, stack = [], list(t.args)   # MUL operands spliced: sum(exp(s) * causal_mask)
        while stack:
            x = stack.pop()
            if x.op is Op.MUL:
                stack.extend(x.args)
            else:
                factors.append(x)
        rest = [x for x in factors if self._sign[x] != POS]
        if len(rest) == 1:   # one 0/1 factor with a 1 in every summed row, the others > 0
            x = rest[0]
            if (self.mask_total and _is_mask_total_operand(x, out)) or _covering(x, contracted):
                return POS
        return _sum_of_copies(prod)


def _product(args: tuple[Term, ...], sign: Mapping[Term, int]) -> int:
    """Signs of a product; a factor repeated ``m`` times is its ``m``-th power (``x*x >= 0``)."""
    count: dict[int, list] = {}
    for x in args:
        g = count.setdefault(id(x), [x, 0])
        g[1] += 1
    s = POS
    for x, m in count.values():
        s = _mul2(s, _pow_sign(sign[x], Fraction(m)))
    return s


_ROWS = frozenset({Op.SHARD, Op.CHUNK, Op.PERMUTE})   # select or reorder blocks along a dim


def _covering(x: Term, contracted: set[str]) -> bool:
    """A 0/1 table with a 1 in every row along a summed dim that is whole (unsharded): a
    ``CAUSAL_MASK`` (its diagonal ``k = q``), a ``ONE_HOT`` of an ``index`` input over its own
    range, a ``TOPK_MASK`` with ``k >= 1`` (and an eligibility operand, if any, that is itself
    covering). Its other dims, summed or not, may be sliced (``SHARD``, ``CHUNK``: that only
    selects rows, and a block is never empty: B42's local ``sum_{E,T} topk_mask``), any dim
    permuted (``PERMUTE`` reorders rows or the entries of a row); ``STOP_GRAD``, ``CAST`` and a
    one-operand ``EINSUM`` (a sum over other, nonempty dims of such a table: B42's
    ``sum_E sum_T topk_mask``) are seen through."""
    sliced: set[str] = set()   # a slice selects rows: fine along any dim but the covering one
    while (x.op in (Op.SHARD, Op.CHUNK, Op.PERMUTE, Op.STOP_GRAD, Op.CAST)
           or x.op is Op.EINSUM and len(x.args) == 1):      # a partial sum over nonempty dims
        if x.op in (Op.SHARD, Op.CHUNK):                     # of it: every row still sums >= 1
            sliced.add(x.attrs[0])
        x = x.args[0]                                        # (a permuted row keeps its 1s)

    def whole(d: str) -> bool:
        return d in contracted and d not in sliced

    match x.op:
        case Op.CAUSAL_MASK:
            return whole(x.attrs[0]) or whole(x.attrs[1])
        case Op.ONE_HOT:
            idx = x.args[0]
            while idx.op in _ROWS:
                idx = idx.args[0]
            return (whole(x.attrs[0]) and not x.dim(x.attrs[0]).shards
                    and idx.op is Op.INPUT and idx.attrs[2] == "index"
                    and len(idx.attrs) > 3 and idx.attrs[3] == x.attrs[0])
        case Op.TOPK_MASK:
            return (whole(x.attrs[0]) and not x.dim(x.attrs[0]).shards
                    and int(x.attrs[1]) >= 1
                    and (len(x.args) == 1 or _covering(x.args[1], {x.attrs[0]})))
    return False


CONTEXT_FREE = Signs(weak=True)
"""Facts from the input domains alone (no spec denominator assumed): shared, memoised."""


class SignedBinding(Binding):
    """Real sizes plus the :class:`Signs` that rule guards consult (what a
    :class:`~rewriting.normalise.Normaliser` built with ``signs=`` hands its rules)."""

    def __init__(self, sizes: Mapping[str, int], signs: Signs):
        super().__init__(dict(sizes))
        self.signs = signs


def signs_for(binding: Any) -> Signs:
    """The :class:`Signs` of a :class:`SignedBinding`, else :data:`CONTEXT_FREE`."""
    return binding.signs if isinstance(binding, SignedBinding) else CONTEXT_FREE


# -- guards -------------------------------------------------------------------------------------
def _powers(xs: Iterable[Term]) -> dict[int, tuple[Term, int]]:
    """``{id(base): (base, requirement)}`` of the factors of ``MUL(xs)`` (nested MULs flattened,
    ``POW(x, e)`` read as ``x^e``; constants skipped): the signs of each base at which every one
    of its powers is defined."""
    out: dict[int, tuple[Term, int]] = {}
    stack = list(xs)
    while stack:
        x = stack.pop()
        if x.op is Op.MUL:
            stack.extend(x.args)
            continue
        if x.op is Op.CONST:
            continue
        base, r = (x.args[0], requirement(x.attrs[0])) if x.op is Op.POW else (x, ANY)
        got = out.get(id(base))
        out[id(base)] = (base, r if got is None else got[1] & r)
    return out


def product_keeps_definedness(xs: Iterable[Term], ys: Iterable[Term], signs: Signs) -> bool:
    """``MUL(xs) -> MUL(ys)`` (same monomial) is defined at the same inputs on both sides: for
    every base, :meth:`Signs.same_definedness` of its requirements (a base missing on the right,
    e.g. ``x^-1 * x -> 1`` or ``0 * x -> 0``, must be defined with all its powers defined)."""
    left, right = _powers(xs), _powers(ys)
    for k, (x, r) in left.items():
        got = right.get(k)
        if not signs.same_definedness(x, r, None if got is None else got[1]):
            return False
    return all(k in left or signs.defined(x) for k, (x, _) in right.items())


def pow_pow_keeps_definedness(x: Term, a: Any, b: Any, signs: Signs) -> bool:
    """``(x^a)^b -> x^(ab)`` is defined at the same inputs on both sides."""
    a, b = Fraction(a), Fraction(b)
    left = 0
    for s in _BITS:
        if s & requirement(a) and not _pow_sign(s, a) & ~requirement(b):
            left |= s
    return signs.same_definedness(x, left, requirement(a * b))


def iter_partial(roots: Iterable[Term]) -> Iterable[tuple[Term, Term, int]]:
    """``(node, argument, requirement)`` of every partial op (powers, ``LOG``) below ``roots``."""
    from spec_lang.term import walk

    for t in walk(list(roots)):
        yield from iter_partial_node(t)


def iter_partial_node(t: Term) -> Iterable[tuple[Term, Term, int]]:
    """``(t, argument, requirement)`` if ``t`` itself is a partial op, else nothing."""
    e = _exponent(t)
    if e is not None and requirement(e) != ANY:
        yield t, t.args[0], requirement(e)
    elif t.op is Op.LOG:
        yield t, t.args[0], POS


def assumed_closure(entries: Iterable[tuple[Term, int]]) -> dict[Term, int]:
    """``{term: allowed}`` for assumed spec denominators ``(term, allowed)``, plus the factors of
    an assumed nonzero product and the bases of its nonzero powers, as nonzero (a product of
    defined factors is 0 only if a factor is). ``proofs/checker_signs.py`` derives the same."""
    out: dict[Term, int] = {}
    for t, r in entries:
        out[t] = out.get(t, ANY) & r
    for n in list(out):
        if out[n] & ZERO:
            continue
        stack = [n]
        while stack:
            x = stack.pop()
            if x.op is Op.MUL:
                stack.extend(c for c in x.args if c.op is not Op.CONST)
            elif x.op is Op.POW and Fraction(x.attrs[0]) != 0:
                stack.append(x.args[0])
            elif x is not n:
                out[x] = out.get(x, ANY) & NONZERO
    return out
