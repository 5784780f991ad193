"""Expert parallelism (EP) for the DeepSeek-style MoE model, with data parallelism, as an SPMD plan.

The program of one rank on ``Mesh(dp, ep)``, after Megatron-LM's MoE layer
(``megatron/core/transformer/moe``: ``MoEAlltoAllTokenDispatcher``, ``moe_utils``) and its DDP
wrapper. EP is carved out of data parallelism: the global batch is split over ``dp x ep`` (each
rank routes its own tokens), the routed experts are split over ``ep`` (``Shard(E)``: rank ``e``
owns ``E / ep`` experts), everything else (attention, router, shared expert, norms, embedding,
head) is replicated.

Per MoE layer and rank:

* routing on the rank's tokens: ``topk_mask`` of the router scores (the top-k acts along ``E``
  only, so a block of tokens gives the block of the global routing: ``lift-shard-topk``);
* **dispatch**: the dispatcher's token permutation (a fixed block order along ``S``,
  ``EPSettings.token_order``, standing for the sort-by-expert of ``permute()``), then an
  all-to-all over ``ep`` that splits ``E`` and concatenates the token dim ``B``
  (``all_to_all_region``: tokens ``Shard(B)`` -> experts ``Shard(E)``; declared backward: the
  reverse all-to-all);
* the rank's experts run on every token routed to them from the whole ``ep`` group;
* **combine**: the reverse all-to-all (split ``B``, concatenate ``E``), then the inverse token
  permutation (``unpermute``), then the gate-weighted sum over experts; the shared expert runs
  on the local tokens.

Loss and gradients. The spec objective is ``L = S/N + alpha * sum_layers A`` (token mean over the
global batch, ``A`` the load-balancing loss of :mod:`spec_lang.models.moe`). Rank ``r`` holds
``S_r / N`` (``N`` all-reduced over ``dp x ep``) and ``A_r``, its addend of ``A`` (global routing
counts, local router probabilities over the global token count): both ``Partial`` over
``dp x ep``. Megatron's DDP averages every gradient over the full data-parallel group, which here
is ``dp x ep`` (:data:`GRAD_SCALE`, ``1/(dp ep)``, Megatron's ``gradient_scaling_factor``, and
for experts ``expert_gradient_scaling_factor``, both ``1/data_parallel_size``), so the seed is
``dp ep (S_r/N + alpha A_r)`` (:data:`LOSS_PREFACTOR` and :data:`AUX_PREFACTOR`; the latter is
the CASES.md B28 rule: pre-multiply a Partial term by every group that later averages it).

* dense (replicated) gradients: ``1/(dp ep)``, then all-reduce (sum) over ``dp`` and ``ep``;
* expert gradients (``Shard(E)`` over ep): the rank's experts already saw every token of its ``ep``
  group through the all-to-all, so they are summed over the *expert-data-parallel* group only:
  ``1/(dp ep)``, then all-reduce over ``dp`` (dp excluding ep). Summing over ``ep`` too would add
  other experts' gradients (the mutant ``expert_grad_axes=("dp", "ep")``).

Limits: routing is dense (every token goes through the all-to-all with zero rows where it is not
routed; no capacity factor or token dropping); the token permutation is a fixed block order, not a
data-dependent sort; group-limited routing is not modelled.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from spec_lang import ops
from spec_lang.collectives import all_reduce, all_to_all_region
from spec_lang.cp import permute
from spec_lang.errors import PlanError
from spec_lang.mesh import Mesh
from spec_lang.models.moe import MoEConfig, MoEContext, MoEDims, MoEModel, moe_forward
from spec_lang.placement import Placement, Shard
from spec_lang.plan import Loss, Plan, microbatches as _microbatches
from spec_lang.plans.megatron import Scale
from spec_lang.spec import Params, Spec
from spec_lang.tensor import Tensor, user_site
from spec_lang.term import Axis

__all__ = ["EPSettings", "ExpertParallel", "expert_parallel", "ep_placements", "LOSS_PREFACTOR",
           "AUX_PREFACTOR", "GRAD_SCALE", "EXPERT_WEIGHTS"]

DP, EP, MB = Axis.DP, Axis.EP, Axis.MB

EXPERT_WEIGHTS = ("moe.experts.w1", "moe.experts.w3", "moe.experts.w2")
"""Per-layer routed-expert weights: ``Shard(E)`` over ep."""

LOSS_PREFACTOR = Scale("dp*ep", ((DP, 1), (EP, 1)),
                       "undoes the gradient average over the data-parallel group dp x ep")
AUX_PREFACTOR = Scale("dp*ep", ((DP, 1), (EP, 1)),
                      "the aux term A_r is Partial over dp x ep and is averaged with the "
                      "gradients: pre-multiply by the group size (CASES.md B28)")
GRAD_SCALE = Scale("1/(dp*ep)", ((DP, -1), (EP, -1)),
                   "DDP's average over the data-parallel group (Megatron: 1/data_parallel_size, "
                   "the same for expert gradients)")


@dataclass(frozen=True)
class EPSettings:
    """The plan's scale factors, groups and dispatch steps (defaults: Megatron-LM's).

    Attributes:
        loss_scale / aux_scale / grad_scale / expert_grad_scale: :class:`Scale` factors.
        dense_grad_axes: all-reduce groups of replicated-parameter gradients.
        expert_grad_axes: all-reduce groups of expert gradients (expert data parallelism).
        token_order: the dispatcher's block permutation of the local tokens along ``S``
            (``None``: no permutation).
        unpermute: the combine applies the inverse permutation.
    """

    loss_scale: Scale = LOSS_PREFACTOR
    aux_scale: Scale = AUX_PREFACTOR
    grad_scale: Scale = GRAD_SCALE
    expert_grad_scale: Scale = GRAD_SCALE
    dense_grad_axes: tuple[str, ...] = (DP, EP)
    expert_grad_axes: tuple[str, ...] = (DP,)
    token_order: tuple[int, ...] | None = (1, 0)
    unpermute: bool = True


class ExpertParallel(MoEContext):
    """MoE hooks of one EP rank: all-to-all dispatch / combine over ``ep``, global counts."""

    def __init__(self, settings: EPSettings, token_axes: tuple[str, ...]):
        self.s = settings
        self.token_axes = token_axes        # axes the tokens are split over (dp, ep, and mb)

    def _global(self, x: Tensor) -> Tensor:
        for a in self.token_axes:
            x = all_reduce(x, a)
        return x

    def dispatch(self, xe: Tensor, d: MoEDims) -> Tensor:
        if self.s.token_order is not None:
            xe = permute(xe, d.S, self.s.token_order)         # sort tokens (by expert)
        return all_to_all_region(xe, EP, d.E, d.B)             # tokens Shard(B) -> experts Shard(E)

    def combine(self, ye: Tensor, d: MoEDims) -> Tensor:
        ye = all_to_all_region(ye, EP, d.B, d.E)               # back to the tokens' ranks
        if self.s.token_order is not None and self.s.unpermute:
            order = self.s.token_order
            ye = permute(ye, d.S, tuple(order.index(j) for j in range(len(order))))
        return ye

    def routing_count(self, count: Tensor, d: MoEDims) -> Tensor:
        return self._global(count)                              # f_e over the global batch

    def loss(self, logits: Tensor, labels: Tensor, mask_: Tensor, d: Any) -> Tensor:
        n = self._global(ops.sum(mask_))                        # global token count N
        return ops.sum(mask_ * ops.cross_entropy_per_token(logits, labels, d.V)) / n   # S_r / N


def ep_placements(model: MoEModel) -> dict[str, dict[str, Placement]]:
    """Tokens, labels and mask ``Shard(B)`` over dp then ep; routed experts ``Shard(E)`` over ep;
    everything else replicated."""
    d = model.dims
    tok: dict[str, Placement] = {DP: Shard(d.B), EP: Shard(d.B)}
    pl: dict[str, dict[str, Placement]] = {"tokens": tok, "labels": tok, "mask": tok}
    for name in model.params:
        if name.split(".", 2)[-1] in EXPERT_WEIGHTS:
            pl[name] = {EP: Shard(d.E)}
    return pl


def _model_of(model: MoEModel | MoEConfig | Spec) -> MoEModel:
    from spec_lang.plans.library import moe_model_of   # library imports this module's peers

    return moe_model_of(model, "expert_parallel")


def expert_parallel(model: MoEModel | MoEConfig | Spec, *, dp: int, ep: int,
                    microbatches: int = 1, settings: EPSettings | None = None) -> Plan:
    """Expert parallelism over ``ep`` with data parallelism over ``dp x ep`` (module docstring).

    Args:
        model: an :class:`~spec_lang.models.moe.MoEModel`, its config, or its spec.
        dp, ep: mesh sizes (``Mesh(dp=dp, ep=ep)``); ``ep`` must divide the routed experts ``E``
            and ``dp * ep`` the batch ``B``.
        microbatches: K micro-batches of gradient accumulation (plain ``ALL_REDUCE(g, mb)``).
            With K > 1 the data are ``Shard(B)`` over dp only, ``microbatches(K, B)`` splits
            them, and each ep rank takes its block of the micro-batch
            (:func:`spec_lang.plans.deepseek.rank_batch`): tokens ``B[dp, mb, ep]``, so the
            dispatch all-to-all concatenates the innermost shard (``ep``); counts and ``N``
            are all-reduced over ``ep``, ``mb`` and ``dp``. The seed per micro-batch is still
            ``dp ep (S_r / N + alpha A_r)`` (``S_r`` and ``A_r`` are addends over ``mb`` too).
        settings: scale factors and groups (the mutants change them).

    Returns:
        the :class:`~spec_lang.plan.Plan`; the spec's optimizer runs on the local shards.

    Raises:
        PlanError: sizes that do not divide (named by the placement checks while tracing).
    """
    from spec_lang.plans.deepseek import rank_batch  # noqa: PLC0415 -- deepseek imports peers

    m = _model_of(model)
    s = settings or EPSettings()
    site = user_site(2)
    if not isinstance(microbatches, int) or isinstance(microbatches, bool) or microbatches < 1:
        raise PlanError(f"{site}: expert_parallel(microbatches={microbatches!r}): a positive "
                        "integer")
    c = m.config
    mb = microbatches > 1
    token_axes = (EP, MB, DP) if mb else (DP, EP)
    experts = {k for k in m.params if k.split(".", 2)[-1] in EXPERT_WEIGHTS}

    def forward(p: Params, data: Mapping[str, Tensor]) -> Loss:
        ctx = ExpertParallel(s, token_axes)
        if mb:      # B[dp, mb] -> B[dp, mb, ep]: the ep block innermost (the all-to-all's)
            data = {k: rank_batch(v, m.dims.B) if k in ("tokens", "labels", "mask") else v
                    for k, v in data.items()}
        main_r, aux_r = moe_forward(p, data, c, m.dims, ctx)   # S_r / N and A_r: Partial
        alpha = c.aux_loss_alpha
        seed = main_r * s.loss_scale.tensor()
        report = main_r
        if alpha:
            seed = seed + aux_r * alpha * s.aux_scale.tensor()
            report = report + aux_r * alpha
        for a in (EP, DP):
            report = all_reduce(report, a)
        return Loss(backward=seed, report=report)

    def reduce_grads(name: str, g: Tensor) -> Tensor:
        if name in experts:
            g = g * s.expert_grad_scale.tensor()
            axes = s.expert_grad_axes
        else:
            g = g * s.grad_scale.tensor()
            axes = s.dense_grad_axes
        for a in axes:
            g = all_reduce(g, a)
        return g

    placements = ep_placements(m)
    if mb:
        for k in ("tokens", "labels", "mask"):
            placements[k] = {DP: Shard(m.dims.B)}
    return Plan(mesh=Mesh(dp=dp, ep=ep), placements=placements, forward=forward,
                reduce_grads=reduce_grads,
                microbatches=_microbatches(microbatches, m.dims.B) if mb else None,
                assumptions=(f"expert parallelism EP{ep} x DP{dp} (tokens over dp x ep), "
                             f"{microbatches} micro-batch(es), dense routing; token count N > 0",),
                site=site)


def with_settings(**kw: Any) -> EPSettings:
    """``EPSettings`` with fields replaced (for mutants)."""
    return replace(EPSettings(), **kw)
