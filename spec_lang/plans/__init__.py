"""Plan library: parallelisation recipes as functions returning a :class:`~spec_lang.plan.Plan`.

``plan_registry("megatron")(model, tp=8, dp=4, microbatches=4)`` is the same as
``megatron(model, ...)``; see ``docs/plans.md``.
"""

from collections.abc import Callable

from spec_lang.errors import PlanError
from spec_lang.plans.clipping import global_grad_norm_sq, grad_norm_sq_fn, shard_axes
from spec_lang.plans.context_parallel import CPSettings, context_parallel
from spec_lang.plans.megatron import (
    COPY_TO_TP, DP_AVERAGE, GATHER_FROM_TP, GRAD_ACCUM, LOSS_PREFACTOR, REDUCE_FROM_TP, TP_REGION_WEIGHTS,
    GATHER_FROM_SP, REDUCE_SCATTER_TO_SP, MegatronSettings, MegatronTP, Scale, colwise,
    partial_grad_axes, layer_plan, megatron, megatron_placements,
    replicated, rowwise, vocab_parallel_cross_entropy, vocab_parallel_embedding,
)
from spec_lang.plans.expert_parallel import EPSettings, ExpertParallel, ep_placements, expert_parallel
from spec_lang.plans.sharded_dp import (
    FlatBuffer, ShardedDP, ShardedDPSettings, fsdp, fsdp_tp, hsdp, sharded_dp, zero1, zero2, zero3,
)
from spec_lang.plans.trainer_plan import stage_groups, trainer_plan, trainer_spec
from spec_lang.plan import Plan

__all__ = [
    # __init__.py
    "PLANS", "plan_registry",
    # clipping.py
    "global_grad_norm_sq", "grad_norm_sq_fn", "shard_axes",
    # context_parallel.py
    "CPSettings", "context_parallel",
    # expert_parallel.py
    "EPSettings", "ExpertParallel", "ep_placements", "expert_parallel",
    # megatron.py
    "COPY_TO_TP", "DP_AVERAGE", "GATHER_FROM_TP", "GRAD_ACCUM", "LOSS_PREFACTOR", "REDUCE_FROM_TP",
    "TP_REGION_WEIGHTS", "MegatronSettings", "MegatronTP", "Scale", "colwise", "layer_plan",
    "megatron", "megatron_placements", "replicated", "rowwise", "vocab_parallel_cross_entropy",
    "vocab_parallel_embedding", "GATHER_FROM_SP", "REDUCE_SCATTER_TO_SP", "partial_grad_axes",
    # sharded_dp.py
    "FlatBuffer", "ShardedDP", "ShardedDPSettings", "fsdp", "fsdp_tp", "hsdp", "sharded_dp",
    "zero1", "zero2", "zero3",
    # trainer_plan.py
    "stage_groups", "trainer_plan", "trainer_spec",
]

PLANS: dict[str, Callable[..., Plan]] = {
    "megatron": megatron,
    "context_parallel": context_parallel,
    "expert_parallel": expert_parallel,
    "zero1": zero1, "zero2": zero2, "zero3": zero3, "fsdp": fsdp, "hsdp": hsdp,
    "fsdp_tp": fsdp_tp,
}
"""Plan recipes by name (STYLE rule 10)."""


def plan_registry(name: str) -> Callable[..., Plan]:
    """The plan recipe called ``name`` (see :data:`PLANS`).

    Raises:
        PlanError: unknown name (the message lists the known ones).
    """
    if name not in PLANS:
        raise PlanError(f"unknown plan {name!r}; known: {sorted(PLANS)}")
    return PLANS[name]
