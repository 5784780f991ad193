"""Optimizers written in traced ops, with exact rational hyper-parameters and explicit state.

Each optimizer updates one parameter from its gradient and state and returns the new values by
output name: the parameter's own name for the updated weight and ``"<state>:<name>"`` for state
(``exp_avg:layers.0.mlp.w1``). The same code runs in the spec (full tensors) and in a plan
(local shards), so both build the same terms.

**State is part of the iteration** (CASES2.md, "optimizer semantics"; issue 13):

* tensor state (``exp_avg``, ``exp_avg_sq``, Muon's ``momentum_buffer``) is an input of the
  iteration (``INPUT(kind="state")``, symbolic: the values left by earlier steps) or, for an
  optimizer built with ``fresh=True``, PyTorch's lazily initialised zeros (the first step of a
  new optimizer);
* Adam's **step counter** is explicit: :class:`AdamW` ``(step=t)`` is the t-th step, its bias
  corrections are ``1 - b1^t`` and ``1 - b2^t``; a fresh optimizer also outputs the counter it
  leaves behind, ``step:<p>`` (a goal: PyTorch keeps one per parameter);
* **initialisation code is part of the plan**: ``Plan(optimizer_init=[InitStep(...)])`` runs
  ``optimizer.step()`` with zero gradients before the iteration (Megatron-FSDP's
  ``fully_shard_optimizer`` materialising state, CASES2.md B46), advancing the counter, feeding
  weight decay into the moments and moving the weights unless it is made inert;
* **parameter groups**: :class:`ParamGroups` gives each parameter its group's optimizer (torch's
  ``param_groups``; Muon with an auxiliary AdamW is two groups);
* **``grad=None`` is not a zero gradient**: a plan's ``reduce_grads`` may return
  :func:`grad_or_none` ``(g, present)``; where ``present`` is 0 PyTorch's optimizers skip the
  parameter entirely (no moment decay, no weight decay, no counter increment), unlike a zero
  gradient (CASES2.md B52(b)). Keller Jordan's Muon instead forces a zero gradient
  (``p.grad = torch.zeros_like(p)``): :attr:`skips_none` says which.

Sources: PyTorch ``torch.optim.AdamW`` / ``Adam`` (decoupled vs. coupled L2 weight decay,
``state["step"]`` incremented before the bias correction); Loshchilov & Hutter, "Decoupled
Weight Decay Regularization" (ICLR 2019), Algorithm 2. Muon is :mod:`spec_lang.muon`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from spec_lang.ops import add, const, einsum, exact, maximum, mul, neg, recip, sqrt, where
from spec_lang.tensor import Tensor, fail, user_site

__all__ = ["Optimizer", "SGD", "AdamW", "Adam", "ParamGroups", "InitStep", "GradOrNone",
           "grad_or_none", "optimizer_for", "CLIP_EPS", "clip_coefficient", "global_norm_sq"]

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


def _zeros(p: Tensor) -> Tensor:
    """A zero of ``p``'s type (``0 * p``): PyTorch's ``torch.zeros_like(p)`` state."""
    return mul(const(0), p)


@dataclass(frozen=True)
class GradOrNone:
    """A gradient that may be ``None`` (PyTorch's ``.grad is None``): ``present`` is a 0/1 tensor
    (a scalar, or with some of the gradient's dims: one flag per expert of a stacked expert
    weight); where it is 0 the parameter has no gradient this step."""

    grad: Tensor
    present: Tensor


def grad_or_none(g: Tensor, present: Any) -> GradOrNone:
    """``g`` where ``present`` is 1 and ``None`` where it is 0, for ``reduce_grads``.

    ``present`` is a 0/1 value computed by the plan, e.g. ``1`` if any token reached the expert
    (``-maximum(-count, -1)`` for an integer count ``>= 0``). The gradient goal ``grad:<p>`` is
    ``present * g`` (None reads as zero there); the optimizer treats ``present = 0`` by its own
    rule (:attr:`AdamW.skips_none`).

    Raises:
        PlanError: ``g`` is not a Tensor.
    """
    if not isinstance(g, Tensor):
        raise fail(f"grad_or_none: the gradient must be a Tensor, got {g!r}", site=user_site(2))
    pres = present if isinstance(present, Tensor) else const(present)
    extra = [d for d in pres.dims if d not in g.dims]
    if extra:
        raise fail(f"grad_or_none: the presence flag {pres.describe()} has dims {extra} that the "
                   f"gradient {g.describe()} lacks", site=user_site(2))
    return GradOrNone(g, pres)


def _check_counter(step: Any, fresh: bool) -> None:
    if isinstance(step, bool) or not isinstance(step, int) or step < 1:
        raise fail(f"step={step!r}: Adam's step counter is a positive integer (1 = first step)",
                   site=user_site(4))
    if fresh and step != 1:
        raise fail(f"fresh=True with step={step}: a freshly built optimizer's first update is "
                   "step 1 (its state is zero); for later steps keep fresh=False (state inputs)",
                   site=user_site(4))


@dataclass(frozen=True, kw_only=True)
class SGD:
    """``p' = p - lr * (g + weight_decay * p)`` (no momentum, no state, no counter)."""

    lr: Any = Fraction(1, 100)
    weight_decay: Any = 0
    fresh: bool = False
    skips_none: bool = True      # torch.optim.SGD: ``if p.grad is None: continue``

    def __post_init__(self) -> None:
        # validate at construction, while the user's line is on the stack (errors name it)
        exact(self.lr, what="lr")
        exact(self.weight_decay, what="weight_decay")

    def state(self) -> dict[str, str]:
        """State name -> value domain (none for plain SGD)."""
        return {}

    @property
    def step(self) -> None:
        """SGD keeps no step counter."""
        return None

    def update(self, name: str, p: Tensor, g: Tensor, state: Mapping[str, Tensor], *,
               t: int | None = None, lr: Any = None, weight_decay: Any = None
               ) -> dict[str, Tensor]:
        """The updated parameter (``t`` is ignored: SGD has no bias correction)."""
        lr = exact(self.lr if lr is None else lr, what="lr")
        wd = exact(self.weight_decay if weight_decay is None else weight_decay,
                   what="weight_decay")
        step = g if wd == 0 else add(g, mul(const(wd), p))
        return {name: add(p, mul(const(-lr), step))}


@dataclass(frozen=True, kw_only=True)
class AdamW:
    """AdamW (decoupled weight decay, PyTorch's formula) at step ``t`` (1-based):

    ``m' = b1 m + (1-b1) g``;  ``v' = b2 v + (1-b2) g^2``;
    ``p' = p (1 - lr wd) - (lr / (1-b1^t)) m' / (sqrt(v' / (1-b2^t)) + eps)``.

    State: ``exp_avg`` (real) and ``exp_avg_sq`` (positive), inputs of the iteration; with
    ``fresh=True`` they start at zero (a new optimizer, PyTorch's lazy initialisation, ``step``
    must be 1) and the iteration also outputs the counter ``step:<p>`` = ``t``.
    """

    lr: Any = Fraction(3, 10000)
    betas: tuple[Any, Any] = (Fraction(9, 10), Fraction(95, 100))
    eps: Any = Fraction(1, 10**8)
    weight_decay: Any = Fraction(1, 10)
    step: int = 1
    fresh: bool = False
    skips_none: bool = True      # torch.optim.AdamW: parameters whose .grad is None are skipped

    decoupled = True             # AdamW: p (1 - lr wd); Adam (below): g + wd p into the moments

    def __post_init__(self) -> None:
        # validate at construction, while the user's line is on the stack (errors name it)
        for what, v in (("lr", self.lr), ("eps", self.eps), ("weight_decay", self.weight_decay)):
            exact(v, what=what)
        for b in self.betas:
            exact(b, what="beta")
        _check_counter(self.step, self.fresh)

    def state(self) -> dict[str, str]:
        return {"exp_avg": "real", "exp_avg_sq": "positive"}

    def update(self, name: str, p: Tensor, g: Tensor, state: Mapping[str, Tensor], *,
               t: int | None = None, lr: Any = None, weight_decay: Any = None
               ) -> dict[str, Tensor]:
        """One step at counter ``t`` (default ``self.step``); ``lr`` / ``weight_decay``
        override the hyper-parameters (an :class:`InitStep` made inert)."""
        lr = exact(self.lr if lr is None else lr, what="lr")
        wd = exact(self.weight_decay if weight_decay is None else weight_decay,
                   what="weight_decay")
        eps = exact(self.eps, what="eps")
        b1, b2 = (exact(b, what="beta") for b in self.betas)
        t = int(self.step if t is None else t)
        bc1, bc2 = 1 - b1**t, 1 - b2**t
        if not self.decoupled and wd != 0:     # torch.optim.Adam: L2 penalty in the gradient
            g = add(g, mul(const(wd), p))
        m = add(mul(const(b1), state["exp_avg"]), mul(const(1 - b1), g))
        v = add(mul(const(b2), state["exp_avg_sq"]), mul(const(1 - b2), mul(g, g)))
        denom = add(sqrt(mul(v, const(1 / bc2))), const(eps))
        decayed = p if (wd == 0 or not self.decoupled) else mul(p, const(1 - lr * wd))
        new_p = add(decayed, mul(const(-lr / bc1), mul(m, recip(denom))))
        return {name: new_p, f"exp_avg:{name}": m, f"exp_avg_sq:{name}": v}


@dataclass(frozen=True, kw_only=True)
class Adam(AdamW):
    """``torch.optim.Adam``: weight decay is an L2 term added to the gradient (``g + wd p``),
    so it enters the moments (coupled); otherwise as :class:`AdamW`."""

    weight_decay: Any = 0
    decoupled = False


Optimizer = Any
"""An optimizer: :class:`SGD`, :class:`AdamW`, :class:`Adam`, :class:`spec_lang.muon.Muon` or
:class:`ParamGroups` (anything with ``state()``, ``update(...)``, ``fresh``, ``step`` and
``skips_none``)."""


@dataclass(frozen=True)
class ParamGroups:
    """PyTorch's parameter groups: each parameter is stepped by its group's optimizer.

    ``groups``: ``[(members, optimizer), ...]`` where ``members`` is a list of parameter names
    (or prefixes ending in ``"."``) or a predicate ``name -> bool``. Every parameter must be in
    exactly one group (a SpecError / PlanError naming it otherwise, raised when the iteration is
    traced). Typical use: no weight decay for norms and biases, or Muon for hidden matrices and
    AdamW for the rest (Keller Jordan's ``MuonWithAuxAdam``)."""

    groups: tuple[tuple[Any, Any], ...]
    site: str = ""

    def __init__(self, groups: Sequence[tuple[Sequence[str] | Callable[[str], bool], Any]]):
        site = user_site(2)
        gs = []
        for i, grp in enumerate(groups):
            if not (isinstance(grp, tuple) and len(grp) == 2):
                raise fail(f"ParamGroups group {i} must be (members, optimizer), got {grp!r}",
                           site=site)
            members, opt = grp
            if not callable(members):
                if isinstance(members, str):
                    raise fail(f"ParamGroups group {i}: members must be a list of names, got "
                               f"the string {members!r}", site=site)
                members = tuple(members)
            if not hasattr(opt, "update"):
                raise fail(f"ParamGroups group {i}: {opt!r} is not an optimizer", site=site)
            gs.append((members, opt))
        object.__setattr__(self, "groups", tuple(gs))
        object.__setattr__(self, "site", site)

    @staticmethod
    def _member(members: Any, name: str) -> bool:
        if callable(members):
            return bool(members(name))
        return any(name == m or (m.endswith(".") and name.startswith(m)) for m in members)

    def for_param(self, name: str) -> Any:
        """The optimizer of ``name``'s group.

        Raises:
            SpecError / PlanError: ``name`` is in no group or in several.
        """
        hits = [i for i, (m, _) in enumerate(self.groups) if self._member(m, name)]
        if len(hits) != 1:
            what = "no parameter group" if not hits else f"groups {hits}"
            raise fail(f"parameter {name!r} is in {what}; every parameter must be in exactly "
                       "one group", site=self.site)
        return self.groups[hits[0]][1]


def optimizer_for(opt: Any, name: str) -> Any:
    """The optimizer that steps parameter ``name`` (its group's, for :class:`ParamGroups`)."""
    return opt.for_param(name) if isinstance(opt, ParamGroups) else opt


@dataclass(frozen=True)
class InitStep:
    """One ``optimizer.step()`` with zero gradients run before the iteration (plan data:
    ``Plan(optimizer_init=[...])``), e.g. to materialise optimizer state for checkpoint loading.

    ``lr`` / ``weight_decay``: overrides for that step (``0`` makes it inert on the weights;
    ``None`` keeps the optimizer's own); ``reset_step``: set the step counter back afterwards
    (``state["step"] = 0`` for a fresh optimizer). Megatron-LM #5974 / PR #5976 (CASES2.md B46):
    the buggy init is ``InitStep()``, the fix ``InitStep(lr=0, weight_decay=0,
    reset_step=True)``."""

    lr: Any = None
    weight_decay: Any = None
    reset_step: bool = False
    note: str = ""
    site: str = ""

    def __post_init__(self) -> None:
        if not self.site:
            object.__setattr__(self, "site", user_site(3))
        for what, v in (("lr", self.lr), ("weight_decay", self.weight_decay)):
            if v is not None:
                exact(v, what=what)


def tensor_state(opt: Any, p: Tensor, inputs: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """The state the iteration starts from: the state inputs, or zeros for a fresh optimizer."""
    if opt.fresh:
        return {st: _zeros(p) for st in opt.state()}
    return dict(inputs)


def first_counter(opt: Any) -> int | None:
    """The step counter before the spec's step (``None``: the optimizer keeps none)."""
    return None if opt.step is None else opt.step - 1


def run_init(opt: Any, name: str, p: Tensor, state: dict[str, Tensor], counter: int | None,
             steps: Sequence[InitStep]) -> tuple[Tensor, dict[str, Tensor], int | None]:
    """Run the plan's ``optimizer_init`` steps on one parameter: zero gradients, the step's
    overrides, the counter advanced (and reset when asked). Returns ``(p, state, counter)``."""
    for s in steps:
        t = None if counter is None else counter + 1
        new = opt.update(name, p, _zeros(p), state, t=t, lr=s.lr, weight_decay=s.weight_decay)
        p = new[name]
        state = {st: new[f"{st}:{name}"] for st in state}
        counter = t
        if s.reset_step and counter is not None:
            counter = 0
    return p, state, counter


def apply_step(opt: Any, name: str, p: Tensor, g: Tensor | GradOrNone,
               state: Mapping[str, Tensor], counter: int | None) -> dict[str, Tensor]:
    """One optimizer step of parameter ``name`` at counter ``counter + 1``; a
    :class:`GradOrNone` gradient is skipped where absent (``opt.skips_none``) or zero there.
    With ``opt.fresh`` the output ``step:<name>`` holds the counter after the step."""
    t = None if counter is None else counter + 1
    if isinstance(g, GradOrNone):
        pres = g.present
        if not opt.skips_none:                 # the optimizer zero-fills a missing gradient
            return apply_step(opt, name, p, mul(pres, g.grad), state, counter)
        new = opt.update(name, p, g.grad, state, t=t)
        old = {name: p, **{f"{st}:{name}": x for st, x in state.items()}}
        out = {k: where(pres, v, old[k]) for k, v in new.items()}
        if opt.fresh and t is not None:
            out[f"step:{name}"] = add(const(counter), pres)
        return out
    out = opt.update(name, p, g, state, t=t)
    if opt.fresh and t is not None:
        out[f"step:{name}"] = const(t)
    return out
