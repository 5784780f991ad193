"""Optimizers written in traced ops, with exact rational hyper-parameters.

Each optimizer updates one parameter from its gradient and state and returns the new values by
output name: the parameter's own name for the updated weight and ``"<state>:<name>"`` for state
(``exp_avg:layers.0.mlp.w1``). The same code runs in the spec (full tensors) and in a plan
(local shards), so both build the same terms.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from spec_lang.ops import add, const, einsum, exact, maximum, mul, neg, recip, sqrt
from spec_lang.tensor import Tensor

__all__ = ["Optimizer", "SGD", "AdamW", "CLIP_EPS", "clip_coefficient", "global_norm_sq"]

CLIP_EPS = Fraction(1, 10**6)
"""PyTorch's ``clip_grad_norm_`` adds 1e-6 to the norm before dividing (torch.nn.utils.clip_grad)."""


def max_norm_value(v: Any, site: str, error: type[Exception]) -> Any:
    """Validate a ``clip_grad_norm`` (Spec or Plan): an exact real ``> 0``.

    Raises:
        ``error`` (SpecError / PlanError): ``site: clip_grad_norm ...`` for a non-exact, zero or
            negative value (a negative max norm flips the gradients' sign).
    """
    from spec_lang.errors import SpecLangError

    try:
        x = exact(v, what="clip_grad_norm")
    except SpecLangError as e:
        msg = str(e).split(": ", 1)[-1]
        raise error(f"{site}: {msg}") from None
    if not bool(x > 0):
        raise error(f"{site}: clip_grad_norm={v!r}: the max global gradient norm must be > 0")
    return x


def global_norm_sq(grads: list[Tensor]) -> Tensor:
    """``sum_p sum(g_p * g_p)`` over full gradients (the spec's squared global L2 norm)."""
    total: Tensor | None = None
    for g in grads:
        s = einsum(g, g, out=())
        total = s if total is None else add(total, s)
    return total if total is not None else const(0)


def clip_coefficient(norm_sq: Tensor, max_norm: Any) -> Tensor:
    """``min(1, max_norm / (sqrt(norm_sq) + 1e-6))`` as in ``torch.nn.utils.clip_grad_norm_``;
    gradients are multiplied by it. ``min(a, b)`` is written ``-maximum(-a, -b)``."""
    ratio = mul(const(max_norm), recip(add(sqrt(norm_sq), const(CLIP_EPS))))
    return neg(maximum(const(-1), neg(ratio)))


@dataclass(frozen=True, kw_only=True)
class SGD:
    """``p' = p - lr * (g + weight_decay * p)`` (no momentum)."""

    lr: Any = Fraction(1, 100)
    weight_decay: Any = 0

    def __post_init__(self) -> None:
        # validate at construction, while the user's line is on the stack (errors name it)
        exact(self.lr, what="lr")
        exact(self.weight_decay, what="weight_decay")

    def state(self) -> dict[str, str]:
        """State name -> value domain (none for plain SGD)."""
        return {}

    def update(self, name: str, p: Tensor, g: Tensor, state: Mapping[str, Tensor]
               ) -> dict[str, Tensor]:
        lr, wd = exact(self.lr, what="lr"), exact(self.weight_decay, what="weight_decay")
        step = g if wd == 0 else add(g, mul(const(wd), p))
        return {name: add(p, mul(const(-lr), step))}


@dataclass(frozen=True, kw_only=True)
class AdamW:
    """AdamW (decoupled weight decay, PyTorch's formula) at step ``t`` (1-based):

    ``m' = b1 m + (1-b1) g``;  ``v' = b2 v + (1-b2) g^2``;
    ``p' = p (1 - lr wd) - (lr / (1-b1^t)) m' / (sqrt(v' / (1-b2^t)) + eps)``.

    State: ``exp_avg`` (real) and ``exp_avg_sq`` (positive), inputs of the iteration.
    """

    lr: Any = Fraction(3, 10000)
    betas: tuple[Any, Any] = (Fraction(9, 10), Fraction(95, 100))
    eps: Any = Fraction(1, 10**8)
    weight_decay: Any = Fraction(1, 10)
    step: int = 1

    def __post_init__(self) -> None:
        # validate at construction, while the user's line is on the stack (errors name it)
        for what, v in (("lr", self.lr), ("eps", self.eps), ("weight_decay", self.weight_decay)):
            exact(v, what=what)
        for b in self.betas:
            exact(b, what="beta")

    def state(self) -> dict[str, str]:
        return {"exp_avg": "real", "exp_avg_sq": "positive"}

    def update(self, name: str, p: Tensor, g: Tensor, state: Mapping[str, Tensor]
               ) -> dict[str, Tensor]:
        lr, eps, wd = (exact(self.lr, what="lr"), exact(self.eps, what="eps"),
                       exact(self.weight_decay, what="weight_decay"))
        b1, b2 = (exact(b, what="beta") for b in self.betas)
        t = int(self.step)
        bc1, bc2 = 1 - b1**t, 1 - b2**t
        m = add(mul(const(b1), state["exp_avg"]), mul(const(1 - b1), g))
        v = add(mul(const(b2), state["exp_avg_sq"]), mul(const(1 - b2), mul(g, g)))
        denom = add(sqrt(mul(v, const(1 / bc2))), const(eps))
        decayed = p if wd == 0 else mul(p, const(1 - lr * wd))
        new_p = add(decayed, mul(const(-lr / bc1), mul(m, recip(denom))))
        return {name: new_p, f"exp_avg:{name}": m, f"exp_avg_sq:{name}": v}


Optimizer = SGD | AdamW
