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


def problem(goals, sizes, path="<hand-built>"):
    """A Problem from ``[(name, kind, expected, actual), ...]`` and a binding dict."""
    from spec_lang.problem import Goal, Problem
    from spec_lang.term import Binding

    mesh = {a: n for a, n in sizes.items() if a in ("dp", "tp", "pp", "cp", "sp", "ep", "mb")}
    return Problem(path=path, source_sha256="0" * 64, binding=Binding(sizes), mesh=mesh,
                   goals=tuple(Goal(n, k, e, a, "", f"{path}:{i + 1}", None)
                               for i, (n, k, e, a) in enumerate(goals)),
                   assumptions=(), spec_outputs={})


def row_parallel(x_name="x", w_name="w"):
    """(spec, plan) of a row-parallel matmul over tp: y = x @ w, w split by rows (F)."""
    x, w = inp(x_name, "B", "F", kind="data"), inp(w_name, "F", "H")
    spec = einsum(("B", "H"), x, w)
    plan = all_reduce(einsum(("B", "H"), shard(x, "F", "tp"), shard(w, "F", "tp")), "tp")
    return spec, plan


SIZES = {"B": 4, "F": 8, "H": 4, "tp": 2, "dp": 2}


def two_row_parallel_certificate() -> dict:
    """The certificate (as a dict) of two row-parallel goals, ``grad:w1`` and ``grad:w2``,
    proved EQUIVALENT (a small genuine certificate for the gzip tests)."""
    from proofs.certificate import certificate_of
    from proofs.prover import prove

    spec, plan = row_parallel()
    spec2, plan2 = row_parallel("x2", "w2")
    r = prove(problem([("grad:w1", "grad", spec, plan), ("grad:w2", "grad", spec2, plan2)],
                      SIZES))
    assert r.verdict == "EQUIVALENT"
    return certificate_of(r)
