"""Hash-consed terms: the one intermediate representation of specs, plans, rules and proofs.

A :class:`Term` is an immutable node ``(op, args, attrs, dims)``. Equal nodes are the same
Python object (hash-consing, as tinygrad's ``UOp``), so structural equality is ``is`` and a
DAG with sharing costs memory proportional to its distinct nodes.

Dims are *named* and *symbolic*: a term stores dim names, never sizes. Sizes come from a
:class:`Binding` (``{"H": 4096, ...}``) when a model is instantiated, so the same term can be
evaluated at real sizes (shape guards in proofs) and at reduced sizes (numeric refutation).

A plan term is the program of *one rank*, written symbolically in the rank's coordinates:

* ``SHARD(x, dim=d, axis=a)`` is the block of ``x`` along ``d`` that the rank with coordinate
  ``r`` on mesh axis ``a`` holds (block ``r`` of ``n = |a|`` equal blocks). If ``x`` itself
  varies over ``a``, each rank takes block ``r`` of its own value (Megatron's ``split``); rules
  that treat SHARD as a slice of one shared tensor must check that ``x`` does not vary over ``a``.
* ``PART(x, axis=a)`` is the rank's addend of ``x`` over ``a`` (``Partial(sum)``): the addends
  over all coordinates of ``a`` sum to ``x``.
* ``ALL_REDUCE(x, axis=a, reduce="sum"|"max")`` combines ``x`` over all coordinates of ``a``;
  ``ALL_GATHER(x, axis=a, dim=d)`` concatenates the blocks along ``d``; the micro-batch loop is
  the pseudo-axis ``mb`` and gradient accumulation is ``ALL_REDUCE(..., axis="mb")``.

So one term stands for every rank at once, and its size does not grow with the mesh.
Each dim of a term's type carries the axes that shard it, outermost first
(``DimSpec("B", ("dp", "mb"))``): the local size is ``size(B) / (|dp| * |mb|)``.
"""

from __future__ import annotations

import enum
import weakref
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Final

__all__ = [
    "Axis",
    "Binding",
    "DimSpec",
    "Op",
    "Term",
    "TermError",
    "ELEMENTWISE",
    "INPUT_DOMAINS",
    "INPUT_KINDS",
    "COLLECTIVE",
    "LEAF",
    "term",
    "walk",
    "varying_axes",
]


class TermError(ValueError):
    """A term was built with inconsistent arguments (an internal or user shape error)."""


class _AxisType(enum.EnumType):
    """``Axis.TPP`` (a typo) raises a one-line error listing the valid axes.

    The error is both a :class:`~spec_lang.errors.PlanError` (the CLI reports it as
    ``file:line: ...``, exit 3) and an :class:`AttributeError` (``hasattr`` / ``getattr`` with a
    default keep working).
    """

    def __getattr__(cls, name: str) -> Any:
        try:
            return super().__getattr__(name)  # type: ignore[misc]
        except AttributeError:
            if name.startswith("_"):
                raise
            from spec_lang.errors import UnknownAxisError
            from spec_lang.tensor import user_site  # lazy: tensor imports this module

            valid = ", ".join(f"{m.name} ({m.value!r})" for m in cls)  # type: ignore[attr-defined]
            raise UnknownAxisError(
                f"{user_site(2)}: unknown axis Axis.{name}; valid axes: {valid}") from None


class Axis(enum.StrEnum, metaclass=_AxisType):
    """Mesh axes (the field's names), plus ``mb``: the micro-batch loop index.

    *axis* always means a mesh axis here; a tensor dimension is a *dim* (STYLE.md rule 2).
    """

    DP = "dp"
    TP = "tp"
    PP = "pp"
    CP = "cp"
    SP = "sp"
    EP = "ep"
    MB = "mb"  # micro-batch index of the gradient-accumulation loop (not a device axis)
    # HSDP's 2-D data-parallel mesh (torchtitan's names): replicas x shards of each replica
    DP_REPLICATE = "dp_replicate"
    DP_SHARD = "dp_shard"


class Op(enum.Enum):
    """The closed op set. Enum order is a valid lowering order; groups are below.

    Every pass that dispatches on ops uses ``match`` ending in ``assert_never`` (or an explicit
    ``raise``), so a new op fails loudly until each pass handles it.
    """

    # -- leaves -----------------------------------------------------------------------------
    INPUT = enum.auto()       # attrs: (name, kind, domain); see INPUT_KINDS, INPUT_DOMAINS
    CONST = enum.auto()       # attrs: (value,) exact scalar (Fraction or sympy number); dims ()
    DIM_SIZE = enum.auto()    # attrs: (dim,) the size of a dim as a scalar (symbolic)
    AXIS_SIZE = enum.auto()   # attrs: (axis,) the size of a mesh axis as a scalar (symbolic)
    RANK_CONST = enum.auto()  # attrs: (axis, values) a scalar that depends on the rank on `axis`
    CAUSAL_MASK = enum.auto() # attrs: (q_dim, k_dim) 0/1 table [k <= q]; dims (q_dim, k_dim)
    ROPE_COS = enum.auto()    # attrs: (seq_dim, half_dim, theta) cos(pos * theta^(-2i/d)) table
    ROPE_SIN = enum.auto()    # attrs: (seq_dim, half_dim, theta)
    # -- elementwise (broadcast by dim name) ---------------------------------------------------
    ADD = enum.auto()         # n-ary sum
    MUL = enum.auto()         # n-ary product
    NEG = enum.auto()
    RECIP = enum.auto()       # 1/x (x != 0 is an assumption recorded by the prover)
    EXP = enum.auto()
    LOG = enum.auto()
    SQRT = enum.auto()
    RSQRT = enum.auto()
    POW = enum.auto()         # attrs: (exponent,) exact rational exponent
    SIGMOID = enum.auto()
    SILU = enum.auto()
    TANH = enum.auto()
    GELU = enum.auto()        # exact x * Phi(x), forward only; ops.gelu builds it from ERF
    ERF = enum.auto()         # the error function 2/sqrt(pi) int_0^x exp(-t^2) dt
    MAXIMUM = enum.auto()     # binary elementwise max
    WHERE = enum.auto()       # (cond, a, b), cond is 0/1
    CAST = enum.auto()        # attrs: (dtype,) identity over the reals; kept for the precision lint
    STOP_GRAD = enum.auto()   # identity forward, zero gradient
    # -- contraction and reduction -------------------------------------------------------------
    EINSUM = enum.auto()      # attrs: (out_dims,) contract every dim not in out_dims
    REDUCE_MAX = enum.auto()  # attrs: (dims,) max over dims
    ONE_HOT = enum.auto()     # args (indices,), attrs (dim,) 0/1 over `dim`; appends dim
    TOPK_MASK = enum.auto()   # attrs: (dim, k) 0/1: the k largest along dim (ties: lower index);
    #                           args (x,) or (x, eligible): top-k among entries whose 0/1
    #                           eligibility (same dims as x) is 1, 0 elsewhere
    # -- movement ------------------------------------------------------------------------------
    RENAME = enum.auto()      # attrs: (old, new)
    CHUNK = enum.auto()       # attrs: (dim, parts, index) block `index` of `parts` equal blocks
    CONCAT = enum.auto()      # attrs: (dim,) concatenation of equal-size blocks, in order
    PERMUTE = enum.auto()     # attrs: (dim, order) block j of the output = block order[j] of x
    SHIFT = enum.auto()       # attrs: (dim,) y[i] = x[i+1] for i < n-1, y[n-1] = 0 (next token)
    # -- lineage and parallel ------------------------------------------------------------------
    SHARD = enum.auto()       # attrs: (dim, axis) this rank's block of x along dim over axis
    PART = enum.auto()        # attrs: (axis,) this rank's addend of x over axis (Partial(sum))
    ALL_REDUCE = enum.auto()  # attrs: (axis, reduce) reduce in {"sum", "max"}
    ALL_GATHER = enum.auto()  # attrs: (axis, dim)
    REDUCE_SCATTER = enum.auto()  # attrs: (axis, dim) = SHARD(ALL_REDUCE(x, axis, sum), dim, axis)
    BROADCAST = enum.auto()   # attrs: (axis, src) the value of x on coordinate src of axis
    ALL_TO_ALL = enum.auto()  # attrs: (axis, split, concat) = SHARD(ALL_GATHER(x, axis, concat), split, axis)
    # -- tracing only (lowered away before proving) --------------------------------------------
    REGION = enum.auto()      # attrs: (name, fwd, bwd, axis, dim) a differentiable collective


INPUT_KINDS: Final = ("param", "data", "state")
"""param: trained weight; data: a batch input (tokens, labels, masks); state: optimizer state."""
INPUT_DOMAINS: Final = ("real", "positive", "mask", "index")
"""Value domains for sampling inputs: any real; > 0 (e.g. Adam's v); 0/1 mask; ``index`` =
an integer in ``[0, size(dim))`` where ``dim`` is the 4th attr of the INPUT (tokens, labels)."""

ELEMENTWISE: Final = frozenset({
    Op.ADD, Op.MUL, Op.NEG, Op.RECIP, Op.EXP, Op.LOG, Op.SQRT, Op.RSQRT, Op.POW, Op.SIGMOID,
    Op.SILU, Op.TANH, Op.GELU, Op.ERF, Op.MAXIMUM, Op.WHERE, Op.CAST, Op.STOP_GRAD,
})
COLLECTIVE: Final = frozenset({
    Op.ALL_REDUCE, Op.ALL_GATHER, Op.REDUCE_SCATTER, Op.BROADCAST, Op.ALL_TO_ALL, Op.REGION,
})
LEAF: Final = frozenset({
    Op.INPUT, Op.CONST, Op.DIM_SIZE, Op.AXIS_SIZE, Op.RANK_CONST, Op.CAUSAL_MASK, Op.ROPE_COS,
    Op.ROPE_SIN,
})


@dataclass(frozen=True, slots=True)
class DimSpec:
    """A dim of a term's type: its name and the mesh axes sharding it, outermost first."""

    name: str
    shards: tuple[str, ...] = ()

    def __str__(self) -> str:
        return self.name + (f"[{','.join(self.shards)}]" if self.shards else "")


class Binding(Mapping[str, int]):
    """Sizes of dims (``"H" -> 4096``) and of mesh axes (``"tp" -> 8``), immutable.

    Raises:
        TermError: a size is not a positive integer.
    """

    def __init__(self, sizes: Mapping[str, int]):
        for k, v in sizes.items():
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise TermError(f"size of {k!r} must be a positive integer, got {v!r}")
        self._sizes = dict(sizes)

    def __getitem__(self, key: str) -> int:
        return self._sizes[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._sizes)

    def __len__(self) -> int:
        return len(self._sizes)

    def replace(self, **sizes: int) -> Binding:
        return Binding({**self._sizes, **sizes})

    def local_size(self, d: DimSpec) -> int:
        """Size of ``d`` on one rank: ``size(name) / prod(size(axis) for axis in shards)``.

        Raises:
            TermError: an axis does not divide the dim (names dim, axis and both sizes).
        """
        n = self[d.name]
        for a in d.shards:
            # "#i/parts" is the pseudo-shard of CHUNK(dim, parts, i): block i of `parts` blocks
            k = int(a.split("/")[1]) if a.startswith("#") else self[a]
            if n % k:
                raise TermError(
                    f"dim {d.name} (size {self[d.name]}) sharded over {'x'.join(d.shards)}: "
                    f"axis {a!r} (size {k}) does not divide the remaining {n}"
                )
            n //= k
        return n

    def __repr__(self) -> str:
        return f"Binding({self._sizes!r})"


class Term:
    """An immutable, hash-consed node. Build with :func:`term`, never with ``Term(...)``.

    Attributes:
        op: the :class:`Op`.
        args: child terms.
        attrs: hashable op parameters (dim names, axis names, exact constants, strings).
        dims: the output type, a tuple of :class:`DimSpec` in storage order.
        uid: a small integer, unique per live node, increasing in creation order (so children
            always have smaller uids than parents: sorting by uid is a topological order).
    """

    __slots__ = ("op", "args", "attrs", "dims", "uid", "_key", "_varying", "_site",
                 "__weakref__")

    op: Op
    args: tuple[Term, ...]
    attrs: tuple[Any, ...]
    dims: tuple[DimSpec, ...]
    uid: int

    def __repr__(self) -> str:
        a = ",".join(repr(x) for x in self.attrs)
        return f"{self.op.name}#{self.uid}({a})[{' '.join(map(str, self.dims))}]"

    def __reduce__(self):  # pickling re-interns (process pools, caches)
        return (term, (self.op, self.args, self.attrs, self.dims))

    @property
    def dim_names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.dims)

    def dim(self, name: str) -> DimSpec:
        for d in self.dims:
            if d.name == name:
                return d
        raise TermError(f"{self!r} has no dim {name!r}")


# key -> weak reference to the live Term (a plain dict and weakref.ref: WeakValueDictionary's
# Python-level get / KeyedRef cost a fifth of a frontier trace); a dead term's entry is dropped
# by its reference's callback, unless a newer term has taken the key since
class _Ref(weakref.ref):
    __slots__ = ("key",)


def _forget(ref: _Ref) -> None:
    if _INTERN.get(ref.key) is ref:
        del _INTERN[ref.key]


_INTERN: dict[tuple, _Ref] = {}
_NEXT_UID = [0]


def _norm_attr(x: Any) -> Any:
    if isinstance(x, float):
        raise TermError(f"float attribute {x!r}: use an exact Fraction or sympy number")
    if isinstance(x, list):
        return tuple(_norm_attr(y) for y in x)
    return x


def term(op: Op, args: tuple[Term, ...] | list[Term], attrs: tuple[Any, ...] | list[Any],
         dims: tuple[DimSpec, ...] | list[DimSpec]) -> Term:
    """Return the unique :class:`Term` with these fields (creating it if needed).

    Raises:
        TermError: an attribute is a float (constants are exact).
    """
    args = tuple(args)
    attrs = tuple(_norm_attr(a) for a in attrs)
    dims = tuple(dims)
    key = (op, tuple(id(a) for a in args), attrs, dims)
    ref = _INTERN.get(key)
    if ref is not None:
        t = ref()
        if t is not None and t.args == args:
            return t
    t = object.__new__(Term)
    t.op, t.args, t.attrs, t.dims = op, args, attrs, dims
    t.uid = _NEXT_UID[0]
    _NEXT_UID[0] += 1
    t._key = key
    t._varying = None
    t._site = None       # where the user first built it (spec_lang.tensor.record_site)
    ref = _INTERN[key] = _Ref(t, _forget)
    ref.key = key
    return t


def walk(roots: Term | list[Term] | tuple[Term, ...]) -> list[Term]:
    """All distinct nodes reachable from ``roots``, children before parents (no recursion)."""
    if isinstance(roots, Term):
        roots = [roots]
    seen: set[int] = set()
    order: list[Term] = []
    stack: list[tuple[Term, bool]] = [(r, False) for r in reversed(list(roots))]
    while stack:
        t, done = stack.pop()
        if done:
            order.append(t)
            continue
        if id(t) in seen:
            continue
        seen.add(id(t))
        stack.append((t, True))
        for c in reversed(t.args):
            if id(c) not in seen:
                stack.append((c, False))
    return order


def varying_axes(t: Term) -> frozenset[str]:
    """Mesh axes (and ``mb``) whose rank coordinate the value of ``t`` depends on.

    A term that does not vary over an axis has the same value on every coordinate of it
    (it is ``Replicate`` there). Computed bottom-up without recursion and cached on the node.
    """
    if t._varying is not None:
        return t._varying
    # post-order walk that stops at nodes already computed (linear over many calls)
    order: list[Term] = []
    stack: list[tuple[Term, bool]] = [(t, False)]
    queued: set[int] = set()
    while stack:
        n, done = stack.pop()
        if done:
            order.append(n)
            continue
        if n._varying is not None or id(n) in queued:
            continue
        queued.add(id(n))
        stack.append((n, True))
        stack.extend((c, False) for c in n.args if c._varying is None)
    for n in order:
        if n._varying is not None:
            continue
        v: set[str] = set()
        for c in n.args:
            v |= c._varying  # type: ignore[operator]
        match n.op:
            case Op.SHARD:
                v.add(n.attrs[1])
            case Op.PART:
                v.add(n.attrs[0])
            case Op.RANK_CONST:
                v.add(n.attrs[0])
            case Op.ONE_HOT:
                # a one-hot over a sharded dim covers the rank's block of it (the local lookup)
                for d in n.dims:
                    if d.name == n.attrs[0]:
                        v.update(a for a in d.shards if not a.startswith("#"))
            case Op.ALL_REDUCE | Op.ALL_GATHER | Op.BROADCAST:
                v.discard(n.attrs[0])
            case Op.REDUCE_SCATTER | Op.ALL_TO_ALL:
                v.add(n.attrs[0])  # gathered over axis, then this rank's block: varies again
            case _:
                pass
        n._varying = frozenset(v)
    return t._varying  # type: ignore[return-value]
