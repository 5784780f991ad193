"""A pipeline stage whose module is wrapped by ``fully_shard`` / FSDP-based ``replicate``
(torchtitan's PP x FSDP2; issue 11, ``docs/torch.md``, "Pipelining").

What torch 2.13 does for real (``stage.py``): for an ``FSDPModule`` stage module every
micro-batch backward (``backward_maybe_with_nosync``) runs with ``set_requires_gradient_sync
(False)`` / ``set_is_last_backward(False)`` / ``set_reshard_after_backward(False)``: the
unsharded gradients accumulate over the micro-batches, unreduced. After the last backward,
``perform_reduce_grad(n)`` (``n``: the micro-batch count, or 1 for ``scale_grads=False``) sets
them back to True, runs every FSDP parameter group's ``post_backward`` (the reduce-scatter of
the accumulated gradient, over the replicate axes the all-reduce, divided by the divide
factor) and the root's final callback, then ``scale_grads(n)`` (``p.grad /= n``). Both
supported schedules call ``perform_reduce_grad`` once, after every backward of the step.

The front end has no FSDP state: ``fully_shard`` is a stand-in (:mod:`dataparallel`) whose
unit view reduces the gradient of each backward pass (``GatherShard`` / ``AllReduceGrad``). So
for a stage module that is such a stand-in, while the step is traced,

* ``backward_maybe_with_nosync`` runs the plain backward (``stage_backward``, torch's branch
  for a module without data parallelism): each micro-batch's gradient is reduced (and divided)
  by its own backward and accumulated into the stored (sharded) gradient;
* ``perform_reduce_grad(n)`` runs only ``scale_grads(n)`` (torch's argument, so
  ``scale_grads=False`` is followed as torch does).

Over the reals this is the same step: reduce-scatter, all-reduce and the division are linear,
so ``sum_k RS(g_k) / f = RS(sum_k g_k) / f``, and torch's schedule follows every micro-batch
backward by the one final reduction (checked: the events end with ``REDUCE_GRAD``). A user's
own ``set_requires_gradient_sync(False)`` stays refused (:mod:`dataparallel`). A stage module
with units inside that is not one itself is torch's plain branch already (its units reduce
every backward for real too: the same sum).

Refused: a stage module that is an ``FSDPModule`` not made by the front end's stand-in (real
FSDP state the capture cannot trace), and a backward kind other than ``"full"`` (the split
input / weight backward of the zero-bubble schedules, refused earlier).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spec_lang.errors import PlanError

__all__ = ["is_stand_in", "check_stage_module", "StandInStage", "STAND_IN_MARK",
           "STAND_IN_ASSUMPTION"]

STAND_IN_MARK = ":fully_shard"
"""Appended to a stand-in stage's ``REDUCE_GRAD/<n>`` event (``REDUCE_GRAD/2:fully_shard``)."""

STAND_IN_ASSUMPTION = (
    "a pipeline stage whose module is wrapped by fully_shard / replicate (the events marked "
    "REDUCE_GRAD/<n>:fully_shard): torch accumulates the micro-batches' gradients unreduced "
    "(set_requires_gradient_sync(False)) and reduces their sum once after the last backward "
    "(perform_reduce_grad: FSDP2's post_backward, then scale_grads(n)); the proof reduces and "
    "divides each micro-batch's gradient in its own backward and sums them, the same over the "
    "reals (the reduction is linear); nothing reads a gradient, or a parameter through its "
    "module, between the first backward and the reduction (docs/torch.md, 'Pipelining')")
"""What a verdict with such a stage assumes, in words (:func:`pp_frontend.pp_assumptions`)."""


def is_stand_in(module: Any) -> bool:
    """Whether ``module`` is an ``FSDPModule`` made by the front end's ``fully_shard`` /
    ``replicate`` stand-in (:func:`dataparallel._as_fsdp_module`), with no real FSDP state."""
    from torch.distributed.fsdp import FSDPModule

    from spec_lang.torch_frontend.dataparallel import own_class

    return isinstance(module, FSDPModule) and own_class(module) is not type(module)


def check_stage_module(submod: Any, refuse: Callable[[str], None]) -> None:
    """Refuse (``refuse(what)`` raises with the user's line) a stage module that is an
    ``FSDPModule`` but not the front end's stand-in: ``fully_shard`` / ``replicate`` applied
    outside ``parallelize`` (real FSDP state, whose post-backward torch's
    ``perform_reduce_grad`` reaches into)."""
    from torch.distributed.fsdp import FSDPModule

    if isinstance(submod, FSDPModule) and not is_stand_in(submod):
        refuse("a pipeline stage whose module is an FSDPModule not wrapped in parallelize "
               "(fully_shard / replicate called elsewhere)")


class StandInStage:
    """Torch's two data-parallel hooks of a pipeline stage, for the capture of one step
    (:func:`pp_capture.pipelining` patches them into ``_PipelineStageBase``).

    ``events``: the stage's executed events (``PPRecord.events``, ``REDUCE_GRAD/<n>`` appended
    before :meth:`perform_reduce_grad` runs); ``refuse(what)`` raises with the user's line.
    """

    def __init__(self, events: list[str], refuse: Callable[[str], None]) -> None:
        self.events, self.refuse, self.backwards = events, refuse, 0

    def backward_for(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """``backward_maybe_with_nosync``: for a stand-in stage module, torch's plain branch
        (``stage_backward`` of the micro-batch, no sync flags: each backward reduces its own
        gradient, module docstring); for any other module torch's own ``original``.

        Raises:
            PlanError: (through ``refuse``) a backward kind other than ``"full"``, or a
                backward after torch's final reduction of the step (a direct call of the
                stage's backward: for real its gradient would stay unreduced).
        """

        def backward_maybe_with_nosync(stage: Any, backward_type: str, bwd_kwargs: dict,
                                       last_backward: bool = False) -> Any:
            if not is_stand_in(stage.submod):
                return original(stage, backward_type, bwd_kwargs, last_backward=last_backward)
            if backward_type != "full":
                self.refuse(f"a {backward_type!r} backward of a stage wrapped by fully_shard")
            if any(e.startswith("REDUCE_GRAD") for e in self.events):
                self.refuse("a backward of a stage wrapped by fully_shard after torch's final "
                            "gradient reduction (perform_reduce_grad): for real its gradient "
                            "is left unreduced")
            from torch.distributed.pipelining import stage as stage_mod

            self.backwards += 1
            return (stage_mod.stage_backward(bwd_kwargs["stage_output"],
                                             bwd_kwargs["output_grads"],
                                             bwd_kwargs["input_values"]), None)

        return backward_maybe_with_nosync

    def reduce_grad_for(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """``perform_reduce_grad``: for a stand-in stage module only torch's
        ``scale_grads(factor)`` when ``factor != 1`` (the reduction ran in every backward,
        module docstring); for any other module torch's own ``original``.

        Raises:
            PlanError: (through ``refuse``) a second reduction in the step.
        """

        def perform_reduce_grad(stage: Any, grad_scale_factor: int) -> Any:
            if not is_stand_in(stage.submod):
                return original(stage, grad_scale_factor)
            if sum(e.startswith("REDUCE_GRAD") for e in self.events) > 1:
                self.refuse("a second gradient reduction (perform_reduce_grad) of a stage "
                            "wrapped by fully_shard in one step")
            self.events[-1] += STAND_IN_MARK     # (pp_frontend.pp_assumptions)
            if grad_scale_factor != 1:
                stage.scale_grads(grad_scale_factor)
            return None

        return perform_reduce_grad

    def at_end(self, site: str) -> None:
        """When the step returned: every backward of a stand-in stage was followed by torch's
        final reduction (``site``: the user's line for the message).

        Raises:
            PlanError: a backward ran and no reduction followed it (a direct call of the
                stage's backward, no schedule step after it).
        """
        if self.backwards and not any(e.startswith("REDUCE_GRAD") for e in self.events):
            raise PlanError(f"{site}: a backward of a pipeline stage wrapped by fully_shard ran "
                            "without torch's final gradient reduction (perform_reduce_grad, "
                            "run by schedule.step): for real its gradient is left unreduced")
