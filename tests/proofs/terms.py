"""Tiny hand-built term constructors for the proofs tests (dims inferred the simple way)."""

from __future__ import annotations

from fractions import Fraction

from spec_lang.term import DimSpec, Op, Term, term


def _union(*xs: Term) -> tuple[DimSpec, ...]:
    out: dict[str, DimSpec] = {}
    for x in xs:
        for d in x.dims:
            out.setdefault(d.name, d)
    return tuple(out.values())


def inp(name: str, *dims: str, kind: str = "param", domain: str = "real") -> Term:
    return term(Op.INPUT, (), (name, kind, domain), tuple(DimSpec(d) for d in dims))


def const(v) -> Term:
    return term(Op.CONST, (), (Fraction(v),), ())


def add(*xs: Term) -> Term:
    return term(Op.ADD, xs, (), _union(*xs))


def mul(*xs: Term) -> Term:
    return term(Op.MUL, xs, (), _union(*xs))


def unary(op: Op, x: Term, *attrs) -> Term:
    return term(op, (x,), attrs, x.dims)


def einsum(out: tuple[str, ...], *xs: Term) -> Term:
    u = {d.name: d for d in _union(*xs)}
    return term(Op.EINSUM, xs, (tuple(out),), tuple(u[n] for n in out))


def shard(x: Term, dim: str, axis: str) -> Term:
    return term(Op.SHARD, (x,), (dim, axis),
                tuple(DimSpec(d.name, d.shards + (axis,)) if d.name == dim else d for d in x.dims))


def part(x: Term, axis: str) -> Term:
    return term(Op.PART, (x,), (axis,), x.dims)


def all_reduce(x: Term, axis: str, reduce: str = "sum") -> Term:
    return term(Op.ALL_REDUCE, (x,), (axis, reduce), x.dims)


def all_gather(x: Term, axis: str, dim: str) -> Term:
    return term(Op.ALL_GATHER, (x,), (axis, dim),
                tuple(DimSpec(d.name, d.shards[:-1]) if d.name == dim else d for d in x.dims))


def axis_size(a: str) -> Term:
    return term(Op.AXIS_SIZE, (), (a,), ())
