"""Muon: momentum, then Newton-Schulz orthogonalisation of the *whole* update matrix.

Keller Jordan, "Muon: An optimizer for hidden layers in neural networks" (2024), reference
implementation ``KellerJordan/Muon`` ``muon.py`` (``zeropower_via_newtonschulz5``,
``muon_update``, ``Muon.step``), with its published constants:

* momentum (``momentum.lerp_(grad, 1 - beta)``): ``buf' = mu buf + (1 - mu) g``; Nesterov
  (``grad.lerp_(momentum, beta)``): ``u = (1 - mu) g + mu buf'`` (else ``u = buf'``);
* ``NS(u)``: ``X = u / (||u||_F + 1e-7)``, then ``steps`` (5) iterations of
  ``A = X X^T``, ``X <- a X + (b A + c A A) X`` with ``(a, b, c) = (3.4445, -4.7750, 2.0315)``,
  where ``X`` is oriented so that ``A`` is the smaller Gram matrix (the reference transposes
  when rows > cols): the contraction runs over the *larger* of the two dims (cols on a tie);
* the shape-dependent scale ``max(1, rows / cols) ** 0.5`` (rows = the output dim, torch's
  ``grad.size(-2)``);
* ``p' = p (1 - lr wd) - lr scale NS(u)``.

Over the reals ``(b A + c A A) X = b A X + c A (A X)``; the DSL writes the right-hand side (two
products with the same Gram matrix). Orientation does not change the value either:
``(X X^T) X = X (X^T X)``, so ``NS`` is transpose-equivariant; it fixes which contraction the
terms carry. The iteration is a degree-5 matrix polynomial per step: ``NS`` is a whole-matrix,
non-linear map, ``rows_I(NS(X)) != NS(rows_I(X))`` and ``NS(X + Y) != NS(X) + NS(Y)``
(CASES2.md B48, B50).

**Sharded matrices** (``tp_mode``, Megatron-LM's ``muon_tp_mode`` words; the plan's optimizer
runs on local shards):

* ``"duplicated"`` (default; Megatron's default since PR #6380): all-gather every sharded dim
  of the update, orthogonalise the full matrix, keep this rank's block. Equal to the spec by
  ``allgather-shard`` / lifting.
* ``"distributed"``: keep the shards and all-reduce the partial products instead: the squared
  Frobenius norm over every sharding axis, and each Gram matrix ``X X^T`` over the axes that
  shard the *contracted* dim. Only valid when no other dim is sharded (a ``PlanError``
  otherwise); equal to the spec by ``allreduce-einsum-split`` and ``lift-shard-einsum``, no
  exact-arithmetic step needed.
* ``"blockwise"``: orthogonalise each local shard as if it were the matrix (Megatron's old
  default, DeepSpeed AutoTP #8437): the update then depends on the sharding, and the prover
  refutes it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from spec_lang.collectives import all_gather, all_reduce
from spec_lang.dims import Dim
from spec_lang.ops import add, const, einsum, exact, mul, recip, rename, sqrt
from spec_lang.tensor import Tensor, current_trace, fail, user_site
from spec_lang.term import DimSpec, Op, term

__all__ = ["Muon", "newton_schulz", "NS5_COEFFICIENTS", "NS5_STEPS", "NS_EPS", "TP_MODES"]

NS5_COEFFICIENTS: tuple[Fraction, Fraction, Fraction] = (
    Fraction("3.4445"), Fraction("-4.7750"), Fraction("2.0315"))
"""``(a, b, c)`` of ``zeropower_via_newtonschulz5`` (KellerJordan/Muon)."""
NS5_STEPS = 5
"""Newton-Schulz iterations of the reference ``muon_update`` (``ns_steps=5``)."""
NS_EPS = Fraction(1, 10**7)
"""``X / (X.norm() + 1e-7)`` in the reference."""
TP_MODES = ("duplicated", "distributed", "blockwise")

Reduce = Callable[[Tensor, str | None], Tensor]


def _size(name: str) -> int | None:
    tr = current_trace()
    return None if tr is None else tr.sizes.get(name)


def newton_schulz(x: Tensor, rows: str, cols: str, *, steps: int = NS5_STEPS,
                  coefficients: tuple[Any, Any, Any] = NS5_COEFFICIENTS, eps: Any = NS_EPS,
                  reduce: Reduce | None = None) -> Tensor:
    """``NS(x)`` of the matrix ``x`` with dims ``(rows, cols)`` (module docstring).

    Args:
        x: ``(rows, cols)`` (named; other dims are an error), possibly a local shard.
        rows, cols: dim names; the contraction runs over the larger (cols on a tie), as the
            reference's transpose does.
        steps, coefficients, eps: the iteration count, ``(a, b, c)`` and the norm's epsilon.
        reduce: ``reduce(partial, contracted_dim)`` completes a partial sum computed on the
            local shard (``"distributed"`` mode): ``contracted_dim`` is the Gram matrix's
            contracted dim, or ``None`` for the squared Frobenius norm. Default: identity.

    Returns:
        ``NS(x)``, same dims as ``x``.

    Raises:
        SpecError / PlanError: ``x`` is not 2-D over ``rows`` and ``cols``; ``steps < 1``.
    """
    if sorted(x.dims) != sorted((rows, cols)) or rows == cols:
        raise fail(f"newton_schulz: {x.describe()} must be a matrix over ({rows}, {cols})",
                   site=user_site(2))
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        raise fail(f"newton_schulz: steps={steps!r} must be a positive integer", site=user_site(2))
    red: Reduce = reduce if reduce is not None else (lambda t, d: t)
    a, b, c = (exact(v, what="Newton-Schulz coefficient") for v in coefficients)
    nr, nc = _size(rows), _size(cols)
    contract, free = (rows, cols) if (nr is not None and nc is not None and nr > nc) else \
        (cols, rows)
    free2 = f"{free}_gram"
    fs = _size(free)
    if fs is not None:
        current_trace().record_dim(Dim(free2, fs))
    norm_sq = red(einsum(x, x, out=()), None)
    X = mul(x, recip(add(sqrt(norm_sq), const(exact(eps, what="eps")))))
    for _ in range(steps):
        A = red(einsum(X, rename(X, free, free2), out=(free, free2)), contract)   # X X^T
        AX = einsum(A, rename(X, free, free2), out=(free, contract))
        AAX = einsum(A, rename(AX, free, free2), out=(free, contract))
        X = add(add(mul(const(a), X), mul(const(b), AX)), mul(const(c), AAX))
    return X


def _shard_of(x: Tensor, dim: str, axis: str) -> Tensor:
    """This rank's block of a full (replicated) value: ``SHARD(x, dim, axis)`` (forward only)."""
    dims = tuple(DimSpec(s.name, s.shards + (axis,)) if s.name == dim else s
                 for s in x.term.dims)
    return Tensor(term(Op.SHARD, (x.term,), (dim, axis), dims), x.site, x.name)


@dataclass(frozen=True, kw_only=True)
class Muon:
    """Muon for 2-D parameters (module docstring), exact hyper-parameters.

    Attributes:
        lr, momentum, weight_decay, nesterov, ns_steps, ns_coefficients, eps: as the reference
            (defaults ``0.02, 0.95, 0, True, 5, (3.4445, -4.7750, 2.0315), 1e-7``).
        matrix: parameter name -> ``(rows, cols)`` dim names (rows = the output dim, torch's
            ``size(-2)``); default for a parameter ``(d_in, d_out)`` (the DSL's ``x @ W``):
            ``(d_out, d_in)``.
        tp_mode: ``"duplicated"``, ``"distributed"`` or ``"blockwise"`` (sharded matrices).
        fresh: the momentum buffer starts at zero (a new optimizer).

    State: ``momentum_buffer`` (real). No step counter. A ``None`` gradient is zero-filled
    (the reference's ``p.grad = torch.zeros_like(p)``).
    """

    lr: Any = Fraction(2, 100)
    momentum: Any = Fraction(95, 100)
    weight_decay: Any = 0
    nesterov: bool = True
    ns_steps: int = NS5_STEPS
    ns_coefficients: tuple[Any, Any, Any] = NS5_COEFFICIENTS
    eps: Any = NS_EPS
    matrix: Mapping[str, tuple[str, str]] | None = None
    tp_mode: str = "duplicated"
    fresh: bool = False
    skips_none: bool = False
    site: str = ""

    def __post_init__(self) -> None:
        if not self.site:
            object.__setattr__(self, "site", user_site(3))
        for what, v in (("lr", self.lr), ("momentum", self.momentum),
                        ("weight_decay", self.weight_decay), ("eps", self.eps)):
            exact(v, what=what)
        if self.tp_mode not in TP_MODES:
            raise fail(f"Muon(tp_mode={self.tp_mode!r}): one of {', '.join(TP_MODES)}",
                       site=self.site)

    @property
    def step(self) -> None:
        """Muon keeps no step counter."""
        return None

    def state(self) -> dict[str, str]:
        return {"momentum_buffer": "real"}

    def _rows_cols(self, name: str, p: Tensor) -> tuple[str, str]:
        if self.matrix is not None and name in self.matrix:
            rows, cols = self.matrix[name]
        elif len(p.dims) == 2:
            cols, rows = p.dims
        else:
            raise fail(f"Muon steps 2-D matrices; {name} is {p.describe()} (give "
                       "matrix={name: (rows, cols)} or put it in an AdamW group)", site=self.site)
        if sorted(p.dims) != sorted((rows, cols)):
            raise fail(f"Muon matrix {name}: ({rows}, {cols}) are not the dims of "
                       f"{p.describe()}", site=self.site)
        return rows, cols

    def orthogonalise(self, name: str, u: Tensor, rows: str, cols: str) -> Tensor:
        """``NS(u)`` of the (possibly sharded) local update ``u`` by :attr:`tp_mode`."""
        kw = dict(steps=self.ns_steps, coefficients=self.ns_coefficients, eps=self.eps)
        sharded = {s.name: s.shards for s in u.term.dims if s.shards}
        if not sharded or self.tp_mode == "blockwise":
            return newton_schulz(u, rows, cols, **kw)
        if self.tp_mode == "duplicated":
            full = u
            for d, axes in sharded.items():
                for a in reversed(axes):
                    full = all_gather(full, a, d)
            out = newton_schulz(full, rows, cols, **kw)
            for d, axes in sharded.items():
                for a in axes:
                    out = _shard_of(out, d, a)
            return out
        every = [a for axes in sharded.values() for a in axes]

        def reduce(t: Tensor, contracted: str | None) -> Tensor:
            axes = every if contracted is None else list(sharded.get(contracted, ()))
            for a in axes:
                t = all_reduce(t, a)
            return t

        nr, nc = _size(rows), _size(cols)
        contract = rows if (nr is not None and nc is not None and nr > nc) else cols
        if set(sharded) != {contract}:
            raise fail(f"Muon(tp_mode='distributed') on {name} {u.describe()}: only the "
                       f"contracted dim {contract} may be sharded (all-reduced Gram matrices); "
                       "use tp_mode='duplicated'", site=self.site)
        return newton_schulz(u, rows, cols, reduce=reduce, **kw)

    def update(self, name: str, p: Tensor, g: Tensor, state: Mapping[str, Tensor], *,
               t: int | None = None, lr: Any = None, weight_decay: Any = None
               ) -> dict[str, Tensor]:
        """One Muon step (``t`` is ignored: no bias correction)."""
        lr = exact(self.lr if lr is None else lr, what="lr")
        wd = exact(self.weight_decay if weight_decay is None else weight_decay,
                   what="weight_decay")
        mu = exact(self.momentum, what="momentum")
        rows, cols = self._rows_cols(name, p)
        buf = add(mul(const(mu), state["momentum_buffer"]), mul(const(1 - mu), g))
        u = add(mul(const(1 - mu), g), mul(const(mu), buf)) if self.nesterov else buf
        o = self.orthogonalise(name, u, rows, cols)
        nr, nc = _size(rows), _size(cols)
        if nr is None or nc is None:
            raise fail(f"Muon: sizes of {rows} and {cols} are unknown", site=self.site)
        ratio = Fraction(nr, nc)
        if ratio > 1:       # max(1, rows/cols) ** 0.5, a term when irrational
            o = mul(sqrt(const(ratio)), o)
        decayed = p if wd == 0 else mul(p, const(1 - lr * wd))
        new_p = add(decayed, mul(const(-lr), o))
        return {name: new_p, f"momentum_buffer:{name}": buf}
