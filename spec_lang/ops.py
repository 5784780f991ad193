"""Traced ops: each builds a term and checks shapes at trace time; nothing is computed.

Dims are matched by *name*. Elementwise ops broadcast by name (an operand lacking a dim is
constant along it); operands that share a dim must agree on its placement (the mesh axes that
shard it), else the error names both tensors and says what to change. ``einsum`` contracts
every dim not in ``out``.

Constants are exact (see :func:`const`): ``int``, :class:`~fractions.Fraction`, sympy radical
sums (``1/sympy.sqrt(128)``, ``1 + sympy.sqrt(2)``: what a certificate can state,
:mod:`spec_lang.exact_numbers`), and Python floats only when their shortest decimal form is
short (``1e-5`` is ``Fraction("1e-05")``; ``0.1 + 0.2`` is rejected).

The op set itself is :class:`spec_lang.term.Op` (re-exported here with its groups).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from fractions import Fraction
from typing import Any

import sympy

from spec_lang.constants import exact_spelling, note_reading, read_float
from spec_lang.dims import Dim, DimLike, dim_name
from spec_lang.exact_numbers import NotCertifiable, certificate_form
from spec_lang.tensor import Tensor, current_trace, fail, user_site
from spec_lang.term import COLLECTIVE, ELEMENTWISE, LEAF, DimSpec, Op, Term, term

__all__ = [
    # op set
    "Op", "ELEMENTWISE", "REDUCE", "MOVEMENT", "COLLECTIVE", "LEAF",
    # constants and leaves
    "const", "exact", "dim_size", "axis_size", "rank_const", "rank", "causal_mask", "rope_cos",
    "rope_sin",
    # elementwise
    "add", "sub", "mul", "div", "neg", "recip", "pow", "exp", "log", "sqrt", "rsqrt", "sigmoid",
    "silu", "tanh", "gelu", "erf", "maximum", "where", "cast", "stop_gradient",
    # contraction and reduction
    "einsum", "matmul", "sum", "mean", "max", "one_hot", "topk_mask",
    # movement
    "rename", "transpose", "chunk", "chunks", "concat",
    # composite (written in the ops above)
    "softmax", "log_softmax", "logsumexp", "rms_norm", "layer_norm", "rope", "embedding",
    "cross_entropy_per_token", "cross_entropy",
    # obligation cutting
    "layer_boundary",
]

REDUCE = frozenset({Op.EINSUM, Op.REDUCE_MAX})
MOVEMENT = frozenset({Op.RENAME, Op.CHUNK, Op.CONCAT})

# A float constant is accepted when its shortest decimal form has at most this many significant
# digits: then it is the literal the user wrote (1e-5, 0.9, 3e-4), not an accident of binary.
_MAX_FLOAT_DIGITS = 10


# -- obligation cutting ----------------------------------------------------------------------------
def layer_boundary(x: Tensor, name: str) -> Tensor:
    """Mark ``x`` (the residual stream, e.g. ``(B, S, H)``) as the value at layer boundary ``name``.

    Returns ``x`` itself (same term: the mark changes no value). The current trace records
    ``(name, term, site)``; when the spec and the plan both mark ``name``, the prover may cut its
    obligations there (``docs/verifier-internals.md``, "Obligation cutting"): it proves each layer
    once as a lemma over a fresh input and reuses the proof for every identical layer. A mark
    outside a trace does nothing. Convention: ``f"layers.{i}"`` before block ``i`` and
    ``f"layers.{L}"`` after the last block.

    Raises:
        TypeError: ``x`` is not a Tensor or ``name`` not a string.
    """
    if not isinstance(x, Tensor) or not isinstance(name, str):
        raise TypeError(f"{user_site(2)}: layer_boundary(x, name) needs a Tensor and a str")
    ctx = current_trace()
    if ctx is not None:
        ctx.boundaries.append((name, x.term, user_site(2)))
    return x


# -- constants -------------------------------------------------------------------------------------

def exact(v: Any, *, what: str = "constant") -> Any:
    """``v`` as an exact scalar: a :class:`Fraction` or a sympy radical sum.

    Raises:
        SpecError/PlanError: ``v`` is a float with a long decimal form, a non-number, a nan/inf,
            or a sympy number that is not a sum of rational multiples of rational powers of
            integers (``pi``, ``log(2)``, ``sqrt(1 + sqrt(2))``: a certificate cannot state it).
    """
    if isinstance(v, bool):
        raise fail(f"{what} {v!r} is a bool; write 0 or 1")
    if isinstance(v, int | Fraction):
        return Fraction(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise fail(f"{what} {v!r} is not a finite real")
        r = repr(v)
        mant = r.lower().split("e")[0].replace("-", "").replace(".", "").lstrip("0")
        if len(mant) > _MAX_FLOAT_DIGITS:
            reading = read_float(v)   # math.sqrt(2 / math.pi), 1 / 3: spec_lang/constants.py
            if reading is None:
                raise fail(f"{what} {v!r} is a float whose decimal form is not short and not "
                           f"a closed form; write it exactly, e.g. {exact_spelling(v)}")
            note_reading(v, reading, user_site(2))
            return reading.value
        return Fraction(r)
    if isinstance(v, sympy.Basic):
        if not v.is_number or not v.is_real or v.has(sympy.zoo, sympy.nan, sympy.oo):
            raise fail(f"{what} {v!r} is not a real number")
        if isinstance(v, sympy.Rational):
            return Fraction(int(v.p), int(v.q))
        if isinstance(v, sympy.Float):
            raise fail(f"{what} {v!r} is a sympy Float; use sympy.Rational or Fraction")
        try:
            certificate_form(v)
        except NotCertifiable as e:
            raise fail(f"{what} {v}: {e}; write it with rationals and rational powers of "
                       f"integers (sympy.sqrt(128), sympy.Rational(1, 3))") from None
        return v
    raise fail(f"{what} {v!r} (a {type(v).__name__}) is not an exact number")


def const(v: Any) -> Tensor:
    """An exact scalar constant, dims ``()`` (see :func:`exact`)."""
    return Tensor(term(Op.CONST, (), (exact(v),), ()), user_site(2))


def _t(x: object) -> Tensor:
    if isinstance(x, Tensor):
        return x
    if isinstance(x, Term):
        return Tensor(x, user_site(3))
    return const(x)


def dim_size(d: DimLike) -> Tensor:
    """The (global) size of dim ``d`` as a scalar, symbolic in proofs: ``|d|``."""
    return Tensor(term(Op.DIM_SIZE, (), (dim_name(d),), ()), user_site(2))


def axis_size(axis: str) -> Tensor:
    """The size of mesh axis ``axis`` (or ``"mb"``) as a scalar: ``|axis|`` (explicit plan data)."""
    return Tensor(term(Op.AXIS_SIZE, (), (str(axis),), ()), user_site(2))


def rank_const(axis: str, values: Sequence[Any]) -> Tensor:
    """A scalar equal to ``values[r]`` on coordinate ``r`` of mesh axis ``axis``.

    Raises:
        PlanError: the number of values differs from the axis size of the traced mesh.
    """
    tr = current_trace()
    vals = tuple(exact(v) for v in values)
    if tr is not None and str(axis) in tr.mesh and len(vals) != tr.mesh[str(axis)]:
        raise fail(f"rank_const over {axis!r} has {len(vals)} values but axis {axis!r} has size "
                   f"{tr.mesh[str(axis)]}; give one value per rank")
    return Tensor(term(Op.RANK_CONST, (), (str(axis), vals), ()), user_site(2))


def rank(axis: str) -> Tensor:
    """This rank's coordinate on ``axis`` (0..n-1) as a scalar (a RANK_CONST)."""
    tr = current_trace()
    if tr is None or str(axis) not in tr.mesh:
        raise fail(f"rank({axis!r}) outside a plan whose mesh has axis {axis!r}")
    return Tensor(term(Op.RANK_CONST, (), (str(axis), tuple(Fraction(i) for i in
                                                             range(tr.mesh[str(axis)]))), ()),
                  user_site(2))


def causal_mask(q: DimLike, k: DimLike) -> Tensor:
    """The 0/1 table ``[k <= q]``, dims ``(q, k)``; ``q`` and ``k`` must have equal sizes."""
    qn, kn = dim_name(q), dim_name(k)
    tr = current_trace()
    if tr is not None and qn in tr.sizes and kn in tr.sizes and tr.sizes[qn] != tr.sizes[kn]:
        raise fail(f"causal_mask({qn}, {kn}): sizes {tr.sizes[qn]} and {tr.sizes[kn]} differ")
    return Tensor(term(Op.CAUSAL_MASK, (), (qn, kn), (DimSpec(qn), DimSpec(kn))), user_site(2))


def _rope_table(op: Op, seq: DimLike, half: DimLike, theta: Any) -> Tensor:
    s, h = dim_name(seq), dim_name(half)
    return Tensor(term(op, (), (s, h, exact(theta, what="rope theta")), (DimSpec(s), DimSpec(h))),
                  user_site(3))


def rope_cos(seq: DimLike, half: DimLike, theta: Any) -> Tensor:
    """``cos(pos_s * theta^(-i/|half|))``, dims ``(seq, half)``; ``half`` = head dim / 2."""
    return _rope_table(Op.ROPE_COS, seq, half, theta)


def rope_sin(seq: DimLike, half: DimLike, theta: Any) -> Tensor:
    """``sin(pos_s * theta^(-i/|half|))``, dims ``(seq, half)``."""
    return _rope_table(Op.ROPE_SIN, seq, half, theta)


# -- elementwise ---------------------------------------------------------------------------------

def _merge_dims(xs: Sequence[Tensor], what: str) -> tuple[DimSpec, ...]:
    """Union of the operands' dims in order of first appearance; shared dims must agree."""
    out: dict[str, tuple[DimSpec, Tensor]] = {}
    for x in xs:
        for d in x.term.dims:
            prev = out.get(d.name)
            if prev is None:
                out[d.name] = (d, x)
            elif prev[0] != d:
                raise fail(
                    f"{what}: dim {d.name} is placed as {prev[0]} in {prev[1].describe()} but as "
                    f"{d} in {x.describe()}; operands sharing a dim must shard it over the same "
                    f"mesh axes (insert an all_gather / shard one side, or rename one dim)")
    return tuple(v[0] for v in out.values())


def _ew(op: Op, xs: Sequence[object], attrs: tuple = (), what: str | None = None) -> Tensor:
    ts = [_t(x) for x in xs]
    dims = _merge_dims(ts, what or op.name.lower())
    return Tensor(term(op, tuple(x.term for x in ts), attrs, dims), user_site(3))


def add(a: object, b: object) -> Tensor:
    """``a + b``, broadcast by dim name. dims: union of both."""
    return _ew(Op.ADD, (a, b), what="add")


def sub(a: object, b: object) -> Tensor:
    """``a - b`` = ``ADD(a, NEG(b))``."""
    return _ew(Op.ADD, (a, neg(b)), what="sub")


def mul(a: object, b: object) -> Tensor:
    """``a * b``, broadcast by dim name."""
    return _ew(Op.MUL, (a, b), what="mul")


def div(a: object, b: object) -> Tensor:
    """``a / b`` = ``MUL(a, RECIP(b))``; a constant divisor becomes the exact constant ``1/b``."""
    if not isinstance(b, Tensor | Term):
        v = exact(b, what="divisor")
        if v == 0:
            raise fail(f"division by the constant {b!r}")
        return _ew(Op.MUL, (a, _t(1 / v if isinstance(v, Fraction) else 1 / v)), what="div")
    return _ew(Op.MUL, (a, recip(b)), what="div")


def neg(x: object) -> Tensor:
    """``-x``."""
    return _ew(Op.NEG, (x,))


def recip(x: object) -> Tensor:
    """``1/x`` (``x != 0`` is an assumption the prover records)."""
    return _ew(Op.RECIP, (x,))


def pow(x: object, e: Any) -> Tensor:  # noqa: A001 -- the field's name
    """``x ** e`` with an exact rational exponent ``e``."""
    ev = exact(e, what="exponent")
    if not isinstance(ev, Fraction):
        raise fail(f"exponent {e!r} must be rational")
    return _ew(Op.POW, (x,), (ev,))


def exp(x: object) -> Tensor:
    """``e^x``."""
    return _ew(Op.EXP, (x,))


def log(x: object) -> Tensor:
    """Natural log (``x > 0`` assumed)."""
    return _ew(Op.LOG, (x,))


def sqrt(x: object) -> Tensor:
    """``sqrt(x)`` (``x >= 0`` assumed)."""
    return _ew(Op.SQRT, (x,))


def rsqrt(x: object) -> Tensor:
    """``1/sqrt(x)`` (``x > 0`` assumed)."""
    return _ew(Op.RSQRT, (x,))


def sigmoid(x: object) -> Tensor:
    """``1/(1+e^-x)``."""
    return _ew(Op.SIGMOID, (x,))


def silu(x: object) -> Tensor:
    """``x * sigmoid(x)``."""
    return _ew(Op.SILU, (x,))


def tanh(x: object) -> Tensor:
    """``tanh(x)``."""
    return _ew(Op.TANH, (x,))


def maximum(a: object, b: object) -> Tensor:
    """Elementwise ``max(a, b)``; forward only (differentiate through ``stop_gradient``)."""
    return _ew(Op.MAXIMUM, (a, b))


def where(cond: object, a: object, b: object) -> Tensor:
    """``a`` where ``cond`` (0/1) is 1, else ``b``."""
    return _ew(Op.WHERE, (cond, a, b))


FLOAT_DTYPES = ("fp64", "float64", "double", "fp32", "float32", "float", "tf32", "bf16",
                "bfloat16", "fp16", "float16", "half", "fp8", "fp8_e4m3", "fp8_e5m2",
                "float8_e4m3fn", "float8_e5m2")
"""dtype names ``cast`` / ``all_reduce(dtype=)`` / ``microbatches(accum_dtype=)`` accept (case
insensitive, optional ``torch.`` prefix); the precision lint (``proofs/precision.py``) ranks
them."""


def check_dtype(dtype: object, what: str = "dtype") -> str:
    """``dtype`` as given (a string) if it names a floating dtype of :data:`FLOAT_DTYPES`.

    Raises:
        SpecError / PlanError: ``file:line: unknown dtype ...; valid: ...`` (one line).
    """
    if not isinstance(dtype, str) or \
            dtype.lower().removeprefix("torch.") not in FLOAT_DTYPES:
        raise fail(f"{what} {dtype!r} is not a known floating dtype; valid: "
                   f"{', '.join(FLOAT_DTYPES)}", site=user_site(3))
    return dtype


def cast(x: object, dtype: str) -> Tensor:
    """Identity over the reals; ``dtype`` (``"bf16"``, ``"fp32"``...) is kept for the precision lint.

    Raises:
        SpecError / PlanError: ``dtype`` not in :data:`FLOAT_DTYPES`.
    """
    return _ew(Op.CAST, (x,), (check_dtype(dtype),))


def stop_gradient(x: object) -> Tensor:
    """Identity forward, zero gradient."""
    return _ew(Op.STOP_GRAD, (x,))


# -- contraction and reduction ---------------------------------------------------------------------

def einsum(*xs: object, out: Iterable[DimLike],
           sum_single: Iterable[DimLike] = ()) -> Tensor:
    """Product of the operands summed over every dim not in ``out``.

    ``einsum(x, w, out=(B, S, F))`` with ``x: (B, S, H)``, ``w: (H, F)`` is ``x @ w``. Dims are
    matched by name; a dim shared by operands must be placed the same way in each; every dim of
    ``out`` must occur in some operand.

    With two or more operands, a dim left out of ``out`` that occurs in only one operand (that
    operand summed over it before the product) is an error unless ``sum_single`` names it: it
    is almost always a typo in ``out`` or in a shape, and it silently proves a different model
    (issue 12, item 5). ``sum_single`` must name exactly such dims (docs/dsl.md, "einsum").

    Raises:
        SpecError (or the trace's error): repeated or unknown ``out`` dims, operands placing a
            shared dim differently, a dim summed out of one operand alone without
            ``sum_single``, or a ``sum_single`` dim that is not one.
    """
    ts = [_t(x) for x in xs]
    if not ts:
        raise fail("einsum of no operands")
    names = tuple(dim_name(d) for d in out)
    if len(set(names)) != len(names):
        raise fail(f"einsum out={names} repeats a dim")
    dims = {d.name: d for d in _merge_dims(ts, "einsum")}
    missing = [n for n in names if n not in dims]
    if missing:
        raise fail(f"einsum out dims {missing} occur in no operand "
                   f"({', '.join(t.describe() for t in ts)}); every output dim must come from "
                   "an operand")
    if len(ts) > 1:
        _check_single_sums(ts, names, dims, tuple(dim_name(d) for d in (
            (sum_single,) if isinstance(sum_single, Dim | str) else sum_single)))
    return Tensor(term(Op.EINSUM, tuple(t.term for t in ts), (names,),
                       tuple(dims[n] for n in names)), user_site(2))


def _check_single_sums(ts: Sequence[Tensor], out: tuple[str, ...], dims: dict[str, DimSpec],
                       allowed: tuple[str, ...]) -> None:
    """A dim summed out of exactly one operand must be named in ``sum_single`` (and only such
    dims may be)."""
    owners = {n: [t for t in ts if n in t.dims] for n in dims}
    single = [n for n in dims if n not in out and len(owners[n]) == 1]
    unmarked = [n for n in single if n not in allowed]
    if unmarked:
        n = unmarked[0]
        raise fail(f"einsum sums out dim {n}, which occurs only in {owners[n][0].describe()} (of "
                   f"{len(ts)} operands): that operand is summed over {n} before the product. "
                   f"If that is meant, write einsum(..., sum_single=({n!r},)); if not, add {n} to "
                   f"out=, or fix the dims of the operands")
    wrong = [n for n in allowed if n not in single]
    if wrong:
        raise fail(f"einsum sum_single names {wrong}, but only dims summed out of exactly one "
                   f"operand belong there (here: {single or 'none'})")


matmul = einsum
"""``matmul(a, b, out=...)`` is :func:`einsum` (dims by name make the two the same)."""


def _dims_arg(x: Tensor, dims: DimLike | Iterable[DimLike] | None) -> tuple[str, ...]:
    if dims is None:
        return x.dims
    if isinstance(dims, Dim | str):
        dims = (dims,)
    names = tuple(dim_name(d) for d in dims)
    for n in names:
        if n not in x.dims:
            raise fail(f"{x.describe()} has no dim {n}")
    return names


def sum(x: object, dims: DimLike | Iterable[DimLike] | None = None) -> Tensor:  # noqa: A001
    """Sum over ``dims`` (all when None): ``EINSUM([x], out=rest)``."""
    t = _t(x)
    red = _dims_arg(t, dims)
    keep = tuple(d for d in t.dims if d not in red)
    return Tensor(term(Op.EINSUM, (t.term,), (keep,), tuple(t.term.dim(n) for n in keep)),
                  user_site(2))


def mean(x: object, dims: DimLike | Iterable[DimLike] | None = None) -> Tensor:
    """``sum(x, dims) * prod(1/|d|)`` with the *global* sizes ``|d|`` (``DIM_SIZE``).

    On a plan rank whose ``x`` is sharded along ``d`` this is the rank's addend of the mean.
    """
    t = _t(x)
    red = _dims_arg(t, dims)
    s = sum(t, red)
    facs = [recip(dim_size(d)) for d in red]
    return _ew(Op.MUL, (s, *facs), what="mean") if facs else s


def max(x: object, dims: DimLike | Iterable[DimLike] | None = None) -> Tensor:  # noqa: A001
    """Max over ``dims`` (``REDUCE_MAX``); forward only: differentiate through ``stop_gradient``."""
    t = _t(x)
    red = _dims_arg(t, dims)
    keep = tuple(d for d in t.term.dims if d.name not in red)
    return Tensor(term(Op.REDUCE_MAX, (t.term,), (red,), keep), user_site(2))


def one_hot(indices: object, d: DimLike, *, shards: tuple[str, ...] = ()) -> Tensor:
    """``onehot[..., v] = [indices[...] == v]`` for ``v`` in ``d``; dims ``indices.dims + (d,)``.

    With ``shards=("tp",)`` ``v`` ranges over this rank's block of ``d`` (vocab-parallel lookup).
    """
    t = _t(indices)
    n = dim_name(d)
    if n in t.dims:
        raise fail(f"one_hot over {n}: {t.describe()} already has dim {n}")
    return Tensor(term(Op.ONE_HOT, (t.term,), (n,), t.term.dims + (DimSpec(n, tuple(shards)),)),
                  user_site(2))


def topk_mask(x: object, d: DimLike, k: int, *, eligible: object | None = None) -> Tensor:
    """0/1 over ``d``: 1 where ``x`` is among the ``k`` largest entries along ``d`` (ties go to
    the lower index, a stable order). dims unchanged, e.g. router scores ``(B, S, E) -> (B, S, E)``.

    With ``eligible`` (a 0/1 tensor with exactly ``x``'s dims, e.g. another ``topk_mask``): the
    ``k`` largest among the entries whose eligibility is 1 (ties to the lower index); ineligible
    entries get 0; if fewer than ``k`` are eligible, all eligible entries get 1. This is
    DeepSeek-V3's group-limited routing (``masked_fill(-inf)`` then ``topk`` in the official
    ``Gate.forward``) written exactly, without a large constant or ``-inf``
    (``TOPK_MASK(x, eligible)``, two operands).

    Top-k selection is discrete (piecewise constant): the result is wrapped in
    ``stop_gradient``, so gradients flow only through the values it selects (MoE gate weights,
    Shazeer et al. 2017; DeepSeek-V3 tech report sec. 2.1.2). ``TOPK_MASK`` itself has no
    gradient rule.

    Raises:
        SpecError/PlanError: ``d`` missing or sharded (gather it first), or ``k`` not in
            ``1..|d|``.
    """
    t = _t(x)
    n = dim_name(d)
    if n not in t.dims:
        raise fail(f"topk_mask over {n}: {t.describe()} has no dim {n}")
    if t.term.dim(n).shards:
        raise fail(f"topk_mask over {n}: {t.describe()} holds only a block of {n}; gather it "
                   f"first (top-k needs every entry along {n})")
    tr = current_trace()
    size = tr.sizes.get(n) if tr is not None else None
    if isinstance(k, bool) or not isinstance(k, int) or k < 1 or (size is not None and k > size):
        raise fail(f"topk_mask over {n}: k={k!r} must be an int in 1..{size or '|' + n + '|'}")
    args: tuple[Term, ...] = (t.term,)
    if eligible is not None:
        el = _t(eligible)
        if sorted(el.term.dims, key=str) != sorted(t.term.dims, key=str):
            raise fail(f"topk_mask over {n}: eligible {el.describe()} must have exactly the dims "
                       f"(and placements) of {t.describe()}")
        args = (t.term, el.term)
    m = term(Op.TOPK_MASK, args, (n, int(k)), t.term.dims)
    return Tensor(term(Op.STOP_GRAD, (m,), (), m.dims), user_site(2))


# -- movement -------------------------------------------------------------------------------------

def _local_size(d: DimSpec) -> int | None:
    tr = current_trace()
    if tr is None or d.name not in tr.sizes:
        return None
    n = tr.sizes[d.name]
    for a in d.shards:
        k = int(a.split("/")[1]) if a.startswith("#") else tr.mesh.get(a)
        if k is None:
            return None
        n //= k
    return n


def rename(x: object, old: DimLike, new: DimLike, *, block: tuple[int, int] | None = None) -> Tensor:
    """The same values with dim ``old`` called ``new`` (e.g. keys' ``S -> T`` in attention).

    Placement is kept. Two special cases make RoPE's rotate-half expressible with typed blocks:

    * ``old`` is a chunk (``HD[#i/2]``): the chunk marker is dropped and ``new`` is a fresh dim
      of the block's size (``Dim("HD_half", HD/2)``).
    * ``block=(i, n)``: the result is block ``i`` of ``n`` of ``new`` (``HD_half -> HD[#i/2]``),
      ready for :func:`concat`.
    """
    t = _t(x)
    on = dim_name(old)
    nn = dim_name(new)
    if on not in t.dims:
        raise fail(f"rename: {t.describe()} has no dim {on}")
    if nn in t.dims and nn != on:
        raise fail(f"rename {on} -> {nn}: {t.describe()} already has dim {nn}")
    src = t.term.dim(on)
    shards = src.shards
    if shards and shards[-1].startswith("#"):
        shards = shards[:-1]
    if block is not None:
        i, n = block
        if not (0 <= i < n):
            raise fail(f"rename block {block}: need 0 <= i < n")
        shards = shards + (f"#{i}/{n}",)
    dst = DimSpec(nn, shards)
    tr = current_trace()
    if tr is not None:
        ls = _local_size(src)
        if isinstance(new, str) and nn not in tr.sizes and ls is not None and not shards:
            tr.record_size(nn, ls)
        ld = _local_size(dst)
        if ls is not None and ld is not None and ls != ld:
            raise fail(f"rename {src} -> {dst}: local sizes {ls} and {ld} differ")
    dims = tuple(dst if d.name == on else d for d in t.term.dims)
    return Tensor(term(Op.RENAME, (t.term,), (on, nn), dims), user_site(2))


def transpose(x: object, *dims: DimLike) -> Tensor:
    """A no-op on meaning (dims are named): returns ``x`` after checking ``dims`` are its dims."""
    t = _t(x)
    names = [dim_name(d) for d in dims]
    if sorted(names) != sorted(t.dims):
        raise fail(f"transpose{tuple(names)} of {t.describe()}: give each dim exactly once")
    return t


def chunk(x: object, d: DimLike, parts: int, index: int) -> Tensor:
    """Block ``index`` of ``parts`` equal blocks of ``x`` along ``d``; the dim's type becomes
    ``d[#index/parts]`` (size ``|d|/parts``)."""
    t = _t(x)
    n = dim_name(d)
    if n not in t.dims:
        raise fail(f"chunk: {t.describe()} has no dim {n}")
    if not (isinstance(parts, int) and parts >= 1 and 0 <= index < parts):
        raise fail(f"chunk({n}, parts={parts}, index={index}): need 0 <= index < parts")
    src = t.term.dim(n)
    ls = _local_size(src)
    if ls is not None and ls % parts:
        raise fail(f"chunk of {t.describe()}: dim {n} (local size {ls}) does not split into "
                   f"{parts} equal blocks; change {n}'s size or the number of parts")
    dst = DimSpec(n, src.shards + (f"#{index}/{parts}",))
    dims = tuple(dst if x.name == n else x for x in t.term.dims)
    return Tensor(term(Op.CHUNK, (t.term,), (n, parts, index), dims), user_site(2))


def chunks(x: object, d: DimLike, parts: int) -> list[Tensor]:
    """All ``parts`` blocks of ``x`` along ``d`` (see :func:`chunk`)."""
    return [chunk(x, d, parts, i) for i in range(parts)]


def concat(xs: Sequence[object], d: DimLike) -> Tensor:
    """Concatenate blocks ``d[#0/n], ..., d[#n-1/n]`` along ``d`` in order (inverse of chunks)."""
    ts = [_t(x) for x in xs]
    n = dim_name(d)
    if not ts:
        raise fail("concat of no blocks")
    base: DimSpec | None = None
    for i, t in enumerate(ts):
        if n not in t.dims:
            raise fail(f"concat along {n}: block {i} {t.describe()} has no dim {n}")
        ds = t.term.dim(n)
        if not ds.shards or ds.shards[-1] != f"#{i}/{len(ts)}":
            raise fail(f"concat along {n}: block {i} is {ds}, expected {n}[...#{i}/{len(ts)}] "
                       f"(a chunk or a rename(..., block=({i}, {len(ts)})))")
        b = DimSpec(n, ds.shards[:-1])
        if base is not None and b != base:
            raise fail(f"concat along {n}: blocks are placed differently ({base} vs {b})")
        base = b
    assert base is not None
    dims: dict[str, DimSpec] = {}
    for t in ts:
        for x in t.term.dims:
            if x.name == n:
                dims.setdefault(n, base)
            elif dims.setdefault(x.name, x) != x:
                raise fail(f"concat: dim {x.name} placed differently across blocks")
    return Tensor(term(Op.CONCAT, tuple(t.term for t in ts), (n,), tuple(dims.values())),
                  user_site(2))


# -- composite ops (written in the primitives above) ----------------------------------------------

def logsumexp(x: object, d: DimLike) -> Tensor:
    """``log(sum_d exp(x))`` computed as ``m + log(sum_d exp(x - m))``, ``m = stop_gradient(max_d x)``.

    Exact over the reals in value *and* gradient: the expression equals ``log sum exp x`` for
    every ``m`` (the ``m`` terms cancel), so its derivative in ``m`` is zero and treating ``m``
    as a constant (stop_gradient) gives the exact derivative in ``x``.
    """
    t = _t(x)
    m = stop_gradient(max(t, d))
    return add(m, log(sum(exp(sub(t, m)), d)))


def softmax(x: object, d: DimLike, *, mask: object | None = None) -> Tensor:
    """``p = e / sum_d e`` with ``e = exp(x - m) * mask``, ``m = stop_gradient(max_d x)``.

    ``mask`` is a 0/1 table (e.g. :func:`causal_mask`) applied multiplicatively on ``exp``: a
    masked entry gets probability exactly 0, with no ``-inf``. The shift ``m`` cancels between
    numerator and denominator, so value and gradient are exact over the reals (see logsumexp).
    dims: those of ``x`` (and of ``mask``).
    """
    t = _t(x)
    m = stop_gradient(max(t, d))
    e = exp(sub(t, m))
    if mask is not None:
        e = mul(e, mask)
    return div(e, sum(e, d))


def log_softmax(x: object, d: DimLike) -> Tensor:
    """``x - logsumexp_d(x)`` (max-shifted, exact; see :func:`logsumexp`)."""
    return sub(x, logsumexp(x, d))


def rms_norm(x: object, w: object, d: DimLike, eps: Any) -> Tensor:
    """``x * rsqrt(mean_d(x^2) + eps) * w``; x: (..., d), w: (d,). ``eps``: an exact constant
    or a scalar tensor (e.g. a ``rank_const``)."""
    t = _t(x)
    ms = mean(mul(t, t), d)
    return mul(mul(t, rsqrt(add(ms, _t(eps)))), w)


def layer_norm(x: object, w: object, b: object, d: DimLike, eps: Any) -> Tensor:
    """``(x - mean_d x) * rsqrt(var_d x + eps) * w + b``; x: (..., d), w, b: (d,)."""
    t = _t(x)
    c = sub(t, mean(t, d))
    var = mean(mul(c, c), d)
    return add(mul(mul(c, rsqrt(add(var, _t(eps)))), w), b)


def rope(x: object, seq: DimLike, head: DimLike, half: Dim, theta: Any) -> Tensor:
    """Rotary embedding, rotate-half form (as Llama/HF): with ``x = [x1, x2]`` split along ``head``,
    ``out = [x1*cos - x2*sin, x2*cos + x1*sin]``, ``cos, sin = rope_cos/sin(seq, half, theta)``.

    x: (..., seq, head); ``half`` is the dim of size ``|head|/2``; returns x's dims.
    """
    t = _t(x)
    hn = dim_name(head)
    x1 = rename(chunk(t, hn, 2, 0), hn, half)
    x2 = rename(chunk(t, hn, 2, 1), hn, half)
    c, s = rope_cos(seq, half, theta), rope_sin(seq, half, theta)
    o1 = sub(mul(x1, c), mul(x2, s))
    o2 = add(mul(x2, c), mul(x1, s))
    return concat([rename(o1, half, hn, block=(0, 2)), rename(o2, half, hn, block=(1, 2))], hn)


def embedding(tokens: object, table: object, vocab: DimLike) -> Tensor:
    """Gather rows: ``einsum(one_hot(tokens, V), table)``; tokens: (B, S), table: (V, H) ->
    (B, S, H). If ``table``'s ``V`` is sharded, the one-hot is the rank's block (masked lookup)."""
    tk, tb = _t(tokens), _t(table)
    v = dim_name(vocab)
    if v not in tb.dims:
        raise fail(f"embedding: table {tb.describe()} has no vocab dim {v}")
    oh = one_hot(tk, v, shards=tb.term.dim(v).shards)
    out = tk.dims + tuple(d for d in tb.dims if d != v)
    return einsum(oh, tb, out=out)


def cross_entropy_per_token(logits: object, labels: object, vocab: DimLike, *,
                            label_smoothing: Any = None) -> Tensor:
    """``ce = logsumexp_V(logits) - logits[label]``; logits: (..., V), labels: (...) -> (...).

    With ``label_smoothing=a`` (an exact constant or a scalar tensor, e.g. written with
    ``dim_size``): ``(1 - a) * ce - a * mean_V(log_softmax_V(logits))``, PyTorch's
    ``F.cross_entropy(..., label_smoothing=a)`` (the target mixed with the uniform distribution:
    ``q = (1 - a) onehot + a / |V|``). ``mean_V`` uses the *global* ``|V|``, so on V-sharded
    logits it is the rank's addend (reduce it over the vocab-parallel axis). Megatron's
    ``vocab_parallel_cross_entropy`` passes ``a = smoothing * |V| / (|V| - 1)``.
    """
    lg, lb = _t(logits), _t(labels)
    v = dim_name(vocab)
    picked = einsum(lg, one_hot(lb, v, shards=lg.term.dim(v).shards), out=lb.dims)
    ce = sub(logsumexp(lg, v), picked)
    if label_smoothing is None:
        return ce
    a = _t(label_smoothing)
    return sub(mul(sub(1, a), ce), mul(a, mean(log_softmax(lg, v), v)))


def cross_entropy(logits: object, labels: object, mask: object, vocab: DimLike) -> Tensor:
    """Masked token mean ``sum(mask * ce) / sum(mask)`` (scalar). The mask carries the ignore
    index: a token whose label is ignored has mask 0."""
    ce = cross_entropy_per_token(logits, labels, vocab)
    m = _t(mask)
    return div(sum(mul(m, ce)), sum(m))




# -- GELU and erf (spec_lang/activations.py): ops.gelu(x, approximate="tanh") ---------------------
from spec_lang.activations import erf, gelu  # noqa: E402,F401

# -- randomness (spec_lang/rng.py): ops.dropout(x, p, rng=RngStream(...)) ---------------------------
from spec_lang.rng import RngStream, dropout, model_parallel_rng  # noqa: E402,F401
