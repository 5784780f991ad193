"""FSDP2's ``MixedPrecisionPolicy`` in the stand-in (``fully_shard(..., mp_policy=...)``, the
FSDP-based ``replicate``; torch 2.13 ``fsdp/_fully_shard/_fsdp_api.py``).

Over the reals a cast between floating dtypes is the identity (``aten._to_copy``'s lowering
rule in :mod:`rules_elementwise`), so the policy changes no value the proof compares. What it
changes is what the user's code *sees*, and code can branch on that: torchtitan always passes
``mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)``,
and a model that tests ``x.dtype`` (a clamp for half precision, a scale chosen by dtype)
computes something else under it. Round 47 (R47-1): the policy was ignored, so such a branch
took the spec's path in the capture and a plan whose real run differs by 0.02 (gradients
doubled in bf16) was EQUIVALENT. The stand-in now casts where FSDP2 does:

* the unsharded parameter (the all-gather output the forward sees) is in ``param_dtype``,
  clamped as ``FSDPParam.init_dtype_attrs`` does: no cast when it equals the parameter's own
  dtype or the parameter is not floating point;
* ``FSDPState._cast_forward_inputs``: the floating tensors of every module's forward inputs are
  cast to the policy's ``param_dtype`` when ``cast_forward_inputs`` (the default), also during
  a recomputation (FSDP2's ``PRE_BACKWARD`` branch) and for every member of a group;
* ``FSDPState._cast_output_dtype``: every module's floating outputs to ``output_dtype``;
* the reduced gradient is set on the sharded parameter in its own dtype (``foreach_reduce``'s
  ``_to_dtype_if_needed(reduce_output, orig_dtype)``); autograd casts it back through the
  unsharded parameter's cast, so the reduction itself runs in the parameter's dtype here.
  ``reduce_dtype`` is not modelled: it changes no value over the reals and nothing user code
  can read (FSDP2's reduce-scatter buffers are internal).
"""

from __future__ import annotations

from typing import Any

import torch

from spec_lang.errors import PlanError

__all__ = ["check_policy", "to_param_dtype", "param_dtype", "cast_inputs", "cast_output",
           "no_output_cast"]


def _policy(u: Any) -> Any:
    return getattr(u, "settings", {}).get("mp_policy")


def check_policy(u: Any) -> None:
    """``fully_shard``'s ``mp_policy`` argument must be a ``MixedPrecisionPolicy`` (torch 2.13
    reads its fields at the call and fails on anything else).

    Raises:
        PlanError: another value, naming the ``fully_shard`` line."""
    from torch.distributed.fsdp import MixedPrecisionPolicy  # noqa: PLC0415

    mp = _policy(u)
    if mp is None or isinstance(mp, MixedPrecisionPolicy):
        return
    raise PlanError(f"{u.settings.get('_site', '<train file>')}: mp_policy={mp!r} is not a "
                    "torch.distributed.fsdp.MixedPrecisionPolicy (torch 2.13 fails reading "
                    "its fields)")


def param_dtype(u: Any, stored: Any) -> torch.dtype | None:
    """The dtype of unit ``u``'s unsharded parameter for the stored (sharded) parameter
    ``stored``, None when it is not cast (torch 2.13 ``FSDPParam.init_dtype_attrs``: no policy,
    no ``param_dtype``, the same dtype, or a parameter that is not floating point)."""
    mp = _policy(u)
    if mp is None or not getattr(u, "fsdp_state", False) or mp.param_dtype is None:
        return None
    if mp.param_dtype == stored.dtype or not stored.dtype.is_floating_point:
        return None
    return mp.param_dtype


def to_param_dtype(u: Any, stored: Any, full: Any) -> Any:
    """``full`` (the gathered local tensor of ``stored``) in the unsharded parameter's dtype
    (:func:`param_dtype`); recorded by autograd when grad mode is on, so the gradient reaching
    the reduction is back in ``stored``'s dtype."""
    dt = param_dtype(u, stored)
    return full if dt is None else full.to(dt)


def _cast(dtype: torch.dtype, x: Any) -> Any:
    from torch.distributed.utils import _apply_to_tensors  # noqa: PLC0415

    def one(t: torch.Tensor) -> torch.Tensor:    # torch 2.13 _fsdp_common._cast_fp_tensor
        if not torch.is_floating_point(t) or t.dtype == dtype:
            return t
        return t.to(dtype)

    return _apply_to_tensors(one, x)


def cast_inputs(u: Any, args: Any, kwargs: Any) -> tuple[Any, Any] | None:
    """FSDP2's ``_cast_forward_inputs`` for unit ``u``'s module: ``(args, kwargs)`` with their
    floating tensors in the policy's ``param_dtype``, or None when the policy casts nothing
    (no ``param_dtype`` or ``cast_forward_inputs=False``)."""
    mp = _policy(u)
    if mp is None or not mp.cast_forward_inputs or mp.param_dtype is None:
        return None
    return _cast(mp.param_dtype, args), _cast(mp.param_dtype, kwargs)


def cast_output(u: Any, out: Any) -> Any:
    """FSDP2's ``_cast_output_dtype``: ``out`` with its floating tensors in the policy's
    ``output_dtype``, or None (the output unchanged) when there is none."""
    mp = _policy(u)
    if mp is None or mp.output_dtype is None:
        return None
    return _cast(mp.output_dtype, out)


def no_output_cast(holds: Any) -> None:
    """A ``fully_shard`` group completed by the root's post-forward (not all its members ran)
    whose ``mp_policy`` has an ``output_dtype``: torch 2.13's
    ``_force_complete_incomplete_states`` then casts the root's output to it, not modelled.
    ``holds``: the group's :class:`fsdp_hold.Hold` objects.

    Raises:
        PlanError: naming the group's ``fully_shard`` line."""
    for h in holds:
        mp = _policy(h.u)
        if mp is not None and mp.output_dtype is not None:
            raise PlanError(f"{h.u.settings.get('_site', '<train file>')}: a fully_shard "
                            "group with mp_policy.output_dtype whose members did not all run "
                            "in the forward: FSDP2 then casts the root's output, not modelled")
