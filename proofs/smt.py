"""The Z3 fallback: a shape-reduced scalar encoding of two terms and an equality query.

Both the prover and the checker call :func:`build_query` on a certificate's node table, so the
SMT-LIB2 text is *regenerated* from the terms on every check (the stored text is never trusted).

Encoding (one z3 expression per element, every rank at once):

* A value is an object array with named axes: rank axes ``@dp, @tp, ...`` (sorted), then the
  node's dims; sizes come from the (shape-reduced) binding, mesh axis sizes are the real ones.
* ``INPUT`` elements are z3 ``Real`` constants ``name[i,j]`` (``positive``: > 0; ``mask``: 0 or 1;
  ``index``: an integer in ``[0, size)``). ``PART`` addends are fresh constants for all but the
  last coordinate, the last being ``x - sum(others)``.
* ``+ * neg recip`` and integer powers are real arithmetic (exact: constants are rationals);
  ``exp log sqrt rsqrt sigmoid silu tanh gelu`` and non-integer powers are uninterpreted
  functions of their argument; ``maximum``/``reduce_max``/``where``/``one_hot`` are ``If``;
  RoPE tables and irrational constants are uninterpreted constants.
* The query asserts the domain premises and ``Or(lhs[e] != rhs[e] for every element e whose
  difference z3's simplifier does not already reduce to 0, nor :func:`_cancels` to a sum of
  monomials whose coefficients all cancel)``; ``unsat`` proves the equality for every input
  at these sizes.

Depends only on z3, numpy and :mod:`proofs.kernel` (it is part of the checker's trusted base).
"""

from __future__ import annotations

import hashlib
import itertools
import json as _json
from collections.abc import Container, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import z3

from proofs.kernel import NodeTable, canonical_json, encode_attr
from spec_lang.evaluate import EvaluationError, common_axes

__all__ = ["SmtError", "SmtQuery", "build_query", "run_query", "local_size"]


class SmtError(ValueError):
    """The terms cannot be encoded (unsupported op, too large, inconsistent sizes)."""


@dataclass
class SmtQuery:
    solver: z3.Solver
    smt2: str
    elements: int  # element pairs compared
    trivial: bool  # every element difference simplified to 0


def local_size(binding: Mapping[str, int], name: str, shards: tuple[str, ...]) -> int:
    n = binding[name]
    for a in shards:
        k = int(a.split("/")[1]) if a.startswith("#") else binding[a]
        if n % k:
            raise SmtError(f"dim {name} (size {binding[name]}) does not divide over {shards}")
        n //= k
    return n


class _Val:
    __slots__ = ("axes", "data")

    def __init__(self, axes: tuple[str, ...], data: np.ndarray):
        self.axes = axes
        self.data = data

    def to(self, axes: tuple[str, ...]) -> np.ndarray:
        perm = [self.axes.index(a) for a in axes if a in self.axes]
        d = self.data.transpose(perm)
        it = iter(d.shape)
        return d.reshape([next(it) if a in self.axes else 1 for a in axes])


def _common_axes(vals: list[_Val], skip: str | None = None
                 ) -> tuple[tuple[str, ...], dict[str, int]]:
    try:
        return common_axes(vals, skip=skip)
    except EvaluationError as e:
        raise SmtError(str(e)) from None


def _align(vals: list[_Val]) -> tuple[tuple[str, ...], list[np.ndarray]]:
    axes, sizes = _common_axes(vals)
    shape = tuple(sizes[a] for a in axes)
    return axes, [np.broadcast_to(v.to(axes), shape) for v in vals]


def _obj(shape: tuple[int, ...], f) -> np.ndarray:
    out = np.empty(shape, dtype=object)
    for idx in itertools.product(*[range(n) for n in shape]):
        out[idx] = f(idx)
    return out


def _map(a: np.ndarray, f) -> np.ndarray:
    out = np.empty(a.shape, dtype=object)
    for idx in itertools.product(*[range(n) for n in a.shape]):
        out[idx] = f(a[idx])
    return out


def _q(v: Any, ctx: z3.Context) -> z3.ArithRef:
    if isinstance(v, Fraction):
        return z3.RealVal(f"{v.numerator}/{v.denominator}", ctx)
    if isinstance(v, int) and not isinstance(v, bool):
        return z3.RealVal(v, ctx)
    if type(v).__module__.startswith("sympy") and getattr(v, "is_Rational", False):
        return z3.RealVal(f"{int(v.p)}/{int(v.q)}", ctx)
    return None  # type: ignore[return-value]


class _Encoder:
    def __init__(self, table: NodeTable, binding: Mapping[str, int], max_elements: int):
        self.t = table
        self.b = binding
        self.max = max_elements
        self.count = 0
        self.memo: dict[int, _Val] = {}
        self.premises: list[z3.BoolRef] = []
        self.ufs: dict[str, z3.FuncDeclRef] = {}
        self.consts: dict[str, z3.ArithRef] = {}
        self.hashes: dict[int, str] = {}
        # a fresh context per query: the SMT-LIB2 text depends only on the terms, so the
        # checker regenerates exactly the same text
        self.ctx = z3.Context()

    def hash(self, i: int) -> str:
        """Merkle hash of node ``i`` (id-independent names for PART addends)."""
        for n in _postorder(self.t, i):
            if n not in self.hashes:
                op, args, attrs, dims = self.t.nodes[n]
                payload = canonical_json([op, [self.hashes[a] for a in args],
                                          [encode_attr(a) for a in attrs],
                                          [[d, list(s)] for d, s in dims]])
                self.hashes[n] = hashlib.sha256(payload.encode()).hexdigest()
        return self.hashes[i]

    def uf(self, name: str, x: z3.ArithRef) -> z3.ArithRef:
        f = self.ufs.get(name)
        if f is None:
            f = self.ufs[name] = z3.Function(name, z3.RealSort(self.ctx), z3.RealSort(self.ctx))
        return f(x)

    def const(self, name: str, positive: bool = False) -> z3.ArithRef:
        c = self.consts.get(name)
        if c is None:
            c = self.consts[name] = z3.Real(name, self.ctx)
            if positive:
                self.premises.append(c > 0)
        return c

    def size(self, name: str, shards: tuple[str, ...]) -> int:
        return local_size(self.b, name, shards)

    def value(self, i: int) -> _Val:
        for n in _postorder(self.t, i, skip=self.memo):
            if n not in self.memo:
                v = self.node(n)
                self.count += v.data.size
                if self.count > self.max:
                    raise SmtError(f"the scalar encoding exceeds {self.max} elements")
                self.memo[n] = v
        return self.memo[i]

    def node(self, i: int) -> _Val:  # noqa: C901, PLR0911, PLR0912 -- one case per op
        op, args, at, dims = self.t.nodes[i]
        v = [self.memo[a] for a in args]
        names = tuple(n for n, _ in dims)
        shape = tuple(self.size(n, s) for n, s in dims)
        match op:
            case "INPUT":
                name, _kind, domain = at[0], at[1], at[2]

                def var(idx: tuple[int, ...]) -> z3.ArithRef:
                    # "in:" keeps inputs apart from the encoding's own names (part:, const:,
                    # rope_*); the (kind, name) pair is JSON-quoted so that no two inputs share
                    # a name (finding R2-7: kind "data:a" + name "b" vs "data" + "a:b")
                    key = f"in:{_json.dumps([_kind, name])}[{','.join(map(str, idx))}]"
                    c = self.consts.get(key)
                    if c is None:
                        if domain == "index":
                            iv = z3.Int(key, self.ctx)
                            self.premises += [iv >= 0, iv < self.b[at[3]]]
                            c = z3.ToReal(iv)
                        else:
                            c = z3.Real(key, self.ctx)
                            if domain == "positive":
                                self.premises.append(c > 0)
                            elif domain == "mask":
                                self.premises.append(z3.Or(c == 0, c == 1))
                            elif domain != "real":
                                raise SmtError(f"input {name!r} has unknown domain {domain!r}")
                        self.consts[key] = c
                    return c
                # an input's elements are named by their index in the *full* tensor when sharded
                return _Val(names, _obj(shape, var))
            case "CONST":
                q = _q(at[0], self.ctx)
                if q is None:
                    q = self.const(f"const:{canonical_json(encode_attr(at[0]))}",
                                   positive=bool(getattr(at[0], "is_positive", False)))
                return _Val((), np.array(q, dtype=object).reshape(()))
            case "DIM_SIZE" | "AXIS_SIZE":
                return _Val((), np.array(z3.RealVal(self.b[at[0]], self.ctx), dtype=object).reshape(()))
            case "RANK_CONST":
                axis, values = at
                if len(values) != self.b[axis]:
                    raise SmtError(f"RANK_CONST over {axis!r} has {len(values)} values")
                qs = [_q(x, self.ctx) for x in values]
                if any(q is None for q in qs):
                    raise SmtError("RANK_CONST with a non-rational value")
                arr = np.empty(len(qs), dtype=object)
                arr[:] = qs
                return _Val(("@" + axis,), arr)
            case "CAUSAL_MASK":
                return _Val(names, _obj(shape, lambda ix: z3.RealVal(int(ix[1] <= ix[0]), self.ctx)))
            case "ROPE_COS" | "ROPE_SIN":
                theta = canonical_json(encode_attr(at[2]))
                return _Val(names, _obj(shape, lambda ix: self.const(
                    f"{op.lower()}({theta})[{ix[0]},{ix[1]}/{shape[1]}]")))
            case "ADD" | "MUL" | "MAXIMUM" | "WHERE":
                axes, ds = _align(v)
                out = np.empty(ds[0].shape, dtype=object)
                for idx in itertools.product(*[range(n) for n in out.shape]):
                    xs = [d[idx] for d in ds]
                    if op == "ADD":
                        out[idx] = z3.Sum(xs) if len(xs) > 1 else xs[0]
                    elif op == "MUL":
                        out[idx] = z3.Product(xs) if len(xs) > 1 else xs[0]
                    elif op == "MAXIMUM":
                        out[idx] = z3.If(xs[0] >= xs[1], xs[0], xs[1])
                    else:
                        out[idx] = z3.If(xs[0] != 0, xs[1], xs[2])
                return _Val(axes, out)
            case "NEG":
                return _Val(v[0].axes, _map(v[0].data, lambda x: -x))
            case "RECIP":
                return _Val(v[0].axes, _map(v[0].data, lambda x: 1 / x))
            case "POW":
                p = at[0]
                pf = Fraction(int(p.p), int(p.q)) if type(p).__module__.startswith("sympy") \
                    and getattr(p, "is_Rational", False) else p
                if isinstance(pf, (int, Fraction)) and Fraction(pf).denominator == 1:
                    k = int(pf)

                    def power(x: z3.ArithRef) -> z3.ArithRef:
                        if k == 0:
                            return z3.RealVal(1, self.ctx)
                        y = z3.Product([x] * abs(k)) if abs(k) > 1 else x
                        return y if k > 0 else 1 / y
                    return _Val(v[0].axes, _map(v[0].data, power))
                name = f"pow({canonical_json(encode_attr(p))})"
                return _Val(v[0].axes, _map(v[0].data, lambda x: self.uf(name, x)))
            case "EXP" | "LOG" | "SQRT" | "RSQRT" | "SIGMOID" | "SILU" | "TANH" | "GELU" | "ERF":
                name = op.lower()
                return _Val(v[0].axes, _map(v[0].data, lambda x: self.uf(name, x)))
            case "CAST" | "STOP_GRAD":
                return v[0]
            case "EINSUM":
                return self.einsum(v, tuple(at[0]))
            case "REDUCE_MAX":
                x = v[0]
                red = [x.axes.index(d) for d in at[0]]
                keep = tuple(a for a in x.axes if a not in at[0])
                moved = np.moveaxis(x.data, red, list(range(len(red))))
                flat = moved.reshape((-1,) + moved.shape[len(red):])

                def mx(idx: tuple[int, ...]) -> z3.ArithRef:
                    acc = flat[(0,) + idx]
                    for j in range(1, flat.shape[0]):
                        y = flat[(j,) + idx]
                        acc = z3.If(acc >= y, acc, y)
                    return acc
                return _Val(keep, _obj(flat.shape[1:], mx))
            case "ONE_HOT":
                (d, shards) = next((n, s) for n, s in dims if n == at[0])
                axes_r = [a for a in shards]
                if any(a.startswith("#") for a in axes_r):
                    raise SmtError("one-hot over a chunked dim")
                full = self.b[d]
                sizes = [self.b[a] for a in axes_r]
                local = self.size(d, shards)
                gidx = np.zeros(sizes + [local], dtype=np.int64)
                block = full
                for k, n in enumerate(sizes):
                    block //= n
                    sh = [1] * (len(sizes) + 1)
                    sh[k] = n
                    gidx = gidx + (np.arange(n) * block).reshape(sh)
                gidx = gidx + np.arange(local).reshape([1] * len(sizes) + [local])
                g = _Val(tuple("@" + a for a in axes_r) + (d,), gidx.astype(object))
                axes, (a, gg) = _align([v[0], g])
                out = np.empty(a.shape, dtype=object)
                for idx in itertools.product(*[range(n) for n in out.shape]):
                    out[idx] = z3.If(a[idx] == int(gg[idx]), z3.RealVal(1, self.ctx),
                                     z3.RealVal(0, self.ctx))
                return _Val(axes, out)
            case "RENAME":
                old, new = at
                return _Val(tuple(new if a == old else a for a in v[0].axes), v[0].data)
            case "CHUNK":
                d, parts, k = at
                x = v[0]
                ax = x.axes.index(d)
                n = x.data.shape[ax]
                if n % parts:
                    raise SmtError(f"CHUNK of {d} (size {n}) into {parts}")
                sl = [slice(None)] * x.data.ndim
                sl[ax] = slice(k * n // parts, (k + 1) * n // parts)
                return _Val(x.axes, x.data[tuple(sl)])
            case "CONCAT":
                axes, ds = _align_concat(v, at[0])
                return _Val(axes, np.concatenate(ds, axis=axes.index(at[0])))
            case "SHARD":
                return self.shard(v[0], at[0], at[1])
            case "PART":
                x, axis = v[0], at[0]
                ra = "@" + axis
                if ra in x.axes:
                    raise SmtError(f"PART over {axis!r} of a value varying over it")
                n = self.b[axis]
                out = np.empty((n,) + x.data.shape, dtype=object)
                for idx in itertools.product(*[range(m) for m in x.data.shape]):
                    xs = [self.const(f"part:{self.hash(i)[:16]}@{r}[{','.join(map(str, idx))}]")
                          for r in range(n - 1)]
                    for r, c in enumerate(xs):
                        out[(r,) + idx] = c
                    out[(n - 1,) + idx] = x.data[idx] - z3.Sum(xs) if xs else x.data[idx]
                return _Val((ra,) + x.axes, out)
            case "ALL_REDUCE":
                return self.all_reduce(v[0], at[0], at[1])
            case "ALL_GATHER":
                return self.all_gather(v[0], at[0], at[1])
            case "REDUCE_SCATTER":
                return self.shard(self.all_reduce(v[0], at[0], "sum"), at[1], at[0])
            case "BROADCAST":
                axis, src = at
                x = v[0]
                ra = "@" + axis
                if ra not in x.axes:
                    return x
                k = x.axes.index(ra)
                return _Val(x.axes[:k] + x.axes[k + 1:], np.take(x.data, src, axis=k))
            case _:
                raise SmtError(f"no scalar encoding for op {op}")

    def einsum(self, v: list[_Val], out_dims: tuple[str, ...]) -> _Val:
        ranks = sorted({a for x in v for a in x.axes if a.startswith("@")})
        axes, ds = _align(v)
        out_axes = tuple(ranks) + out_dims
        # product of all operands (broadcast), then sum over the axes not in the output
        prod = np.empty(ds[0].shape, dtype=object)
        for idx in itertools.product(*[range(n) for n in prod.shape]):
            xs = [d[idx] for d in ds]
            prod[idx] = z3.Product(xs) if len(xs) > 1 else xs[0]
        red = [k for k, a in enumerate(axes) if a not in out_axes]
        moved = np.moveaxis(prod, red, list(range(len(red))))
        flat = moved.reshape((-1,) + moved.shape[len(red):])
        rest = tuple(a for a in axes if a in out_axes)

        def total(idx: tuple[int, ...]) -> z3.ArithRef:
            xs = [flat[(j,) + idx] for j in range(flat.shape[0])]
            return z3.Sum(xs) if len(xs) > 1 else xs[0]
        out = _Val(rest, _obj(flat.shape[1:], total))
        missing = [a for a in out_dims if a not in rest]
        if missing:
            raise SmtError(f"einsum output dims {missing} are in no operand")
        return _Val(out_axes, out.to(out_axes))

    def shard(self, x: _Val, dim: str, axis: str) -> _Val:
        ra = "@" + axis
        if ra in x.axes:
            raise SmtError(f"SHARD over {axis!r} of a value that already varies over it")
        n = self.b[axis]
        k = x.axes.index(dim)
        size = x.data.shape[k]
        if size % n:
            raise SmtError(f"SHARD of {dim} (size {size}) over {axis} (size {n})")
        d = x.data.reshape(x.data.shape[:k] + (n, size // n) + x.data.shape[k + 1:])
        return _Val((ra,) + x.axes, np.moveaxis(d, k, 0))

    def all_reduce(self, x: _Val, axis: str, reduce: str) -> _Val:
        ra = "@" + axis
        if reduce not in ("sum", "max"):
            raise SmtError(f"ALL_REDUCE with reduce {reduce!r}")
        if ra not in x.axes:
            if reduce == "max":
                return x
            n = self.b[axis]
            return _Val(x.axes, _map(x.data, lambda e: n * e))
        k = x.axes.index(ra)
        moved = np.moveaxis(x.data, k, 0)

        def red(idx: tuple[int, ...]) -> z3.ArithRef:
            xs = [moved[(j,) + idx] for j in range(moved.shape[0])]
            if reduce == "sum":
                return z3.Sum(xs) if len(xs) > 1 else xs[0]
            acc = xs[0]
            for y in xs[1:]:
                acc = z3.If(acc >= y, acc, y)
            return acc
        return _Val(x.axes[:k] + x.axes[k + 1:], _obj(moved.shape[1:], red))

    def all_gather(self, x: _Val, axis: str, dim: str) -> _Val:
        ra = "@" + axis
        n = self.b[axis]
        if ra not in x.axes:
            k = x.axes.index(dim)
            return _Val(x.axes, np.concatenate([x.data] * n, axis=k))
        d = np.moveaxis(x.data, x.axes.index(ra), 0)
        axes = tuple(a for a in x.axes if a != ra)
        k = axes.index(dim)
        d = np.moveaxis(d, 0, k)
        return _Val(axes, d.reshape(d.shape[:k] + (d.shape[k] * d.shape[k + 1],) + d.shape[k + 2:]))


def _postorder(t: NodeTable, i: int, skip: Container[int] = ()) -> list[int]:
    """Node ids below ``i``, children first, not descending into ids in ``skip`` (no recursion)."""
    order: list[int] = []
    seen: set[int] = set()
    stack = [(i, False)]
    while stack:
        n, done = stack.pop()
        if done:
            order.append(n)
            continue
        if n in seen or n in skip:
            continue
        seen.add(n)
        stack.append((n, True))
        stack.extend((c, False) for c in t.nodes[n][1] if c not in skip)
    return order


def _align_concat(vals: list[_Val], dim: str) -> tuple[tuple[str, ...], list[np.ndarray]]:
    axes, sizes = _common_axes(vals, skip=dim)
    out = []
    for v in vals:
        d = v.to(axes)
        shape = tuple(d.shape[k] if a == dim else sizes.get(a, 1) for k, a in enumerate(axes))
        out.append(np.broadcast_to(d, shape))
    return axes, out


def build_query(table: NodeTable, lhs: int, rhs: int, binding: Mapping[str, int], *,
                max_elements: int = 200_000) -> SmtQuery:
    """Encode ``lhs == rhs`` (node ids of ``table``) at ``binding``; deterministic.

    Raises:
        SmtError: an op without a scalar encoding, inconsistent sizes, or too many elements.
    """
    enc = _Encoder(table, binding, max_elements)
    try:
        a, b = enc.value(lhs), enc.value(rhs)
        axes, (da, db) = _align([a, b])
    except (KeyError, IndexError, ValueError, TypeError, z3.Z3Exception) as e:
        if isinstance(e, SmtError):
            raise
        raise SmtError(f"cannot encode: {type(e).__name__}: {e}") from e
    diffs: list[z3.BoolRef] = []
    for idx in itertools.product(*[range(n) for n in da.shape]):
        x, y = da[idx], db[idx]
        if z3.eq(x, y):
            continue
        d = z3.simplify(x - y, som=True)
        if z3.is_rational_value(d) and d.as_fraction() == 0 or _cancels(d):
            continue
        diffs.append(x != y)
    s = z3.Solver(ctx=enc.ctx)
    for p in enc.premises:
        s.add(p)
    s.add(z3.Or(diffs) if diffs else z3.BoolVal(False, enc.ctx))
    return SmtQuery(solver=s, smt2=s.to_smt2(), elements=int(da.size), trivial=not diffs)


def _cancels(d: z3.ArithRef) -> bool:
    """Whether ``d`` is 0 as a polynomial with rational coefficients over opaque atoms.

    ``d`` is read as a sum (``+``, ``-``, unary ``-``) of products (``*``) of rational constants
    and atoms; an atom is any other subterm (``tanh(..)``, ``1/s``, ``If(..)``, a nested sum),
    identified by z3's hash-consed AST id, so equal atoms are the same expression. Products
    commute, so a monomial is its sorted multiset of atoms; ``d`` is 0 when every monomial's
    coefficients sum to 0. Sound for any ``d`` (an atom it cannot read is kept opaque); it
    catches what ``simplify(som=True)`` leaves uncancelled when one side's products nest
    differently (tests/bugs/test_schedules.py, the prefix average before a full average).
    """
    coeffs: dict[tuple[int, ...], Fraction] = {}
    todo: list[tuple[z3.ExprRef, Fraction]] = [(d, Fraction(1))]
    while todo:
        t, sign = todo.pop()
        k = t.decl().kind() if z3.is_app(t) else None
        if k == z3.Z3_OP_ADD:
            todo.extend((c, sign) for c in t.children())
        elif k == z3.Z3_OP_SUB:
            c0, *rest = t.children()
            todo.append((c0, sign))
            todo.extend((c, -sign) for c in rest)
        elif k == z3.Z3_OP_UMINUS:
            todo.append((t.arg(0), -sign))
        else:
            coef, atoms, factors = sign, [], [t]
            while factors:
                f = factors.pop()
                fk = f.decl().kind() if z3.is_app(f) else None
                if fk == z3.Z3_OP_MUL:
                    factors.extend(f.children())
                elif fk == z3.Z3_OP_UMINUS:
                    coef, factors = -coef, factors + [f.arg(0)]
                elif z3.is_rational_value(f):
                    coef *= f.as_fraction()
                else:
                    atoms.append(f.get_id())
            key = tuple(sorted(atoms))
            coeffs[key] = coeffs.get(key, Fraction(0)) + coef
    return all(c == 0 for c in coeffs.values())


def run_query(q: SmtQuery, timeout_s: float) -> str:
    """``"unsat"`` (proved), ``"sat"`` (a counterexample exists) or ``"unknown: reason"``."""
    if q.trivial:
        return "unsat"
    q.solver.set("timeout", max(1, int(timeout_s * 1000)))
    r = q.solver.check()
    if r == z3.unsat:
        return "unsat"
    if r == z3.sat:
        return "sat"
    return f"unknown: {q.solver.reason_unknown()}"
