"""Exact flat-index views (``Tensor.view`` / ``reshape``) of 2-D tensors, and DTensor's view rule.

A row-major ``(R, C)`` tensor viewed as ``(R2, C2)`` with ``C2`` dividing ``C`` splits every row
into ``q = C / C2`` rows: row ``i q + j`` of the result is columns ``[j C2, (j+1) C2)`` of row
``i``. The DSL has no reshape op; :func:`view` writes it exactly with the movement ops: the ``q``
column blocks (``chunk`` + ``rename``), stacked along ``R2`` (``concat``: row ``j |R| + i``),
then the rows interleaved (``PERMUTE`` along ``R2``: block ``p`` of the result is row
``(p mod q) |R| + p div q``). Shapes are fixed at trace time (``|R2| = q |R|``).

:func:`dtensor_view` is the view as PyTorch's DTensor sharding rule computed it for a tensor
``Shard(C)`` over a mesh axis (CASES2.md B69, pytorch #179502): each rank views its *local*
``(R, C/n)`` block as if it were the whole tensor and the result is labelled ``Shard(R2)``
without any communication. Its term states what the ranks really hold through the global
tensor (as :func:`spec_lang.dtensor.to_local` does): block ``r`` of the concatenation of the
ranks' local views. Comparing it with ``view(full_tensor)`` is the flat-index check a
capture-based verifier needs: no DTensor rule is consulted.
"""

from __future__ import annotations

from spec_lang.collectives import all_gather
from spec_lang.cp import permute
from spec_lang.dims import Dim, DimLike, dim_name
from spec_lang.ops import chunk, concat, rename
from spec_lang.tensor import Tensor, current_trace, fail, user_site
from spec_lang.term import DimSpec, Op, term

__all__ = ["view", "dtensor_view"]


def _size(d: str) -> int:
    tr = current_trace()
    if tr is None or d not in tr.sizes:
        raise fail(f"view: the size of dim {d!r} is unknown here; pass its Dim",
                   site=user_site(3))
    return tr.sizes[d]


def _fresh(name: str, size: int) -> str:
    tr = current_trace()
    assert tr is not None
    tr.record_dim(Dim(name, size))
    return name


def view(x: Tensor, src: tuple[DimLike, DimLike], dst: tuple[DimLike, DimLike]) -> Tensor:
    """``x.view(|R2|, |C2|)`` of a row-major ``(R, C)`` tensor (module docstring).

    Args:
        x: dims ``(R, C)`` (named; both unsharded).
        src: ``(R, C)``, the row and column dims of ``x``.
        dst: ``(R2, C2)``, fresh dims with ``|C2|`` dividing ``|C|`` and ``|R2| = |R| |C| / |C2|``.

    Raises:
        SpecError / PlanError: dims that do not match, a sharded dim, sizes that do not divide.
    """
    r, c = (dim_name(d) for d in src)
    r2, c2 = (dim_name(d) for d in dst)
    if sorted(x.dims) != sorted((r, c)):
        raise fail(f"view: {x.describe()} is not a matrix over ({r}, {c})", site=user_site(2))
    if any(s.shards for s in x.term.dims):
        raise fail(f"view of {x.describe()}: a sharded dim; gather it first (or see "
                   "dtensor_view)", site=user_site(2))
    nr, nc, nr2, nc2 = _size(r), _size(c), _size(r2), _size(c2)
    if nc % nc2 or nr2 * nc2 != nr * nc:
        raise fail(f"view ({r}={nr}, {c}={nc}) -> ({r2}={nr2}, {c2}={nc2}): only row splits "
                   f"(|{c2}| dividing |{c}|, same number of elements) are modelled",
                   site=user_site(2))
    q = nc // nc2
    if q == 1:
        return rename(rename(x, c, c2), r, r2)
    blocks = [rename(rename(chunk(x, c, q, j), c, c2), r, r2, block=(j, q)) for j in range(q)]
    stacked = concat(blocks, r2)                               # row j |R| + i
    return permute(stacked, r2, [(p % q) * nr + p // q for p in range(nr2)])


def dtensor_view(x: Tensor, src: tuple[DimLike, DimLike], dst: tuple[DimLike, DimLike],
                 axis: str) -> Tensor:
    """The local view DTensor's rule returned for ``x`` ``Shard(C)`` over ``axis`` (module
    docstring): each rank's ``(R, C/n)`` block viewed as ``(R2/n, C2)`` and labelled
    ``Shard(R2)``. Returns a tensor of type ``(R2[axis], C2)``.

    Raises:
        SpecError / PlanError: ``x`` is not ``Shard(C)`` over exactly ``axis``; sizes that do
            not divide.
    """
    r, c = (dim_name(d) for d in src)
    r2, c2 = (dim_name(d) for d in dst)
    cs = next((s for s in x.term.dims if s.name == c), None)
    if cs is None or cs.shards != (str(axis),):
        raise fail(f"dtensor_view: {x.describe()} must be Shard({c}) over {axis!r} only",
                   site=user_site(2))
    tr = current_trace()
    assert tr is not None
    n = tr.mesh[str(axis)]
    full = all_gather(x, axis, c)                            # names the data; no communication
    cl = _fresh(f"{c}_local", _size(c) // n)
    rl = _fresh(f"{r2}_local", _size(r2) // n)
    blocks = []
    for k in range(n):
        local = rename(chunk(full, c, n, k), c, cl)          # rank k's local block (R, C/n)
        blocks.append(rename(view(local, (r, cl), (rl, c2)), rl, r2, block=(k, n)))
    wrong = concat(blocks, r2)                               # the labelled global tensor
    dims = tuple(DimSpec(s.name, s.shards + (str(axis),)) if s.name == r2 else s
                 for s in wrong.term.dims)
    return Tensor(term(Op.SHARD, (wrong.term,), (r2, str(axis)), dims), user_site(2))
