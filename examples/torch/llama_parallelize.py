"""torchtitan-style parallelisation of :mod:`llama_model` (after torchtitan's
``models/llama3/infra/parallelize.py``, the DTensor-era ``apply_tp``; written for this project).

``parallelize_llama(model, world_mesh, ...)`` applies tensor parallelism with sequence
parallelism on the ``tp`` axis (``apply_tp``), full or selective activation checkpointing of
every block when asked (``apply_ac``), then FSDP2 on the ``dp`` axes (``apply_fsdp``) or
DDP-style ``replicate`` (``apply_ddp``), in torchtitan's order; the train files call it
unchanged.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.distributed._composable.replicate import replicate
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel, PrepareModuleInput, RowwiseParallel, SequenceParallel, parallelize_module,
)
from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts


def apply_tp(model: nn.Module, tp_mesh: DeviceMesh, loss_parallel: bool = True) -> None:
    """Tensor parallelism with sequence parallelism (Megatron-style), per torchtitan."""
    # 1. embedding (vocab-parallel, output sharded on the sequence), final norm, output head
    parallelize_module(model, tp_mesh, {
        "tok_embeddings": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
        "norm": SequenceParallel(),
        "output": ColwiseParallel(input_layouts=Shard(1),
                                  output_layouts=Shard(-1) if loss_parallel else Replicate(),
                                  use_local_output=not loss_parallel),
    })
    apply_tp_blocks(model, tp_mesh)


def apply_tp_blocks(model: nn.Module, tp_mesh: DeviceMesh) -> None:
    """Every transformer block: attention and feed-forward column/row parallel, norms on
    sequence shards."""
    for block in model.layers.values():
        parallelize_module(block, tp_mesh, {
            "attention_norm": SequenceParallel(),
            "attention": PrepareModuleInput(input_layouts=(Shard(1), None, None),
                                            desired_input_layouts=(Replicate(), None, None)),
            "attention.wq": ColwiseParallel(),
            "attention.wk": ColwiseParallel(),
            "attention.wv": ColwiseParallel(),
            "attention.wo": RowwiseParallel(output_layouts=Shard(1)),
            "ffn_norm": SequenceParallel(),
            "feed_forward": PrepareModuleInput(input_layouts=(Shard(1),),
                                               desired_input_layouts=(Replicate(),)),
            "feed_forward.w1": ColwiseParallel(),
            "feed_forward.w2": RowwiseParallel(output_layouts=Shard(1)),
            "feed_forward.w3": ColwiseParallel(),
        })


def apply_ac(model: nn.Module, mode: str = "full") -> None:
    """Activation checkpointing of every transformer block, per torchtitan's ``apply_ac``: the
    block wrapped in torch's non-reentrant ``checkpoint_wrapper``, its activations recomputed in
    the backward. ``mode="full"`` recomputes everything; ``mode="selective"`` is torchtitan's
    op-level selective checkpointing (``selective_ac_option="op"``): the outputs of every other
    ``aten.mm`` (counted per block, separately in the forward and the recomputation) and of
    attention and ``reduce_scatter`` are saved, the rest recomputed."""
    if mode not in ("full", "selective"):
        raise ValueError(f"apply_ac: mode must be 'full' or 'selective', not {mode!r}")
    for name, block in list(model.layers.named_children()):
        context = {} if mode == "full" else {"context_fn": _op_sac_context}
        model.layers.register_module(name, checkpoint_wrapper(block, preserve_rng_state=False,
                                                              **context))


def _op_sac_context() -> tuple:
    """A fresh pair of SAC contexts for one checkpointed call, with its own mm counters."""
    counts = {"forward": 0, "recompute": 0}

    def policy(ctx: Any, op: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
        if op is torch.ops.aten.mm.default:
            side = "recompute" if ctx.is_recompute else "forward"
            counts[side] += 1
            save = counts[side] % 2 == 1
        else:
            save = op in _SAVED
        return CheckpointPolicy.MUST_SAVE if save else CheckpointPolicy.PREFER_RECOMPUTE

    return create_selective_checkpoint_contexts(policy)


_SAVED = frozenset({torch.ops.aten._scaled_dot_product_efficient_attention.default,
                    torch.ops.aten._scaled_dot_product_flash_attention.default,
                    torch.ops._c10d_functional.reduce_scatter_tensor.default,
                    torch.ops.aten.max.default})


def apply_fsdp(model: nn.Module, dp_mesh: DeviceMesh, reshard_after_forward: bool = True,
               param_dtype: torch.dtype | None = None,
               reduce_dtype: torch.dtype | None = None) -> None:
    """FSDP2 on every transformer block, then on the root, with torchtitan's mixed-precision
    policy (its ``mixed_precision_param`` / ``mixed_precision_reduce``; the examples pass
    torchtitan's defaults, bfloat16 and float32; None: no cast)."""
    mp_policy = MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=reduce_dtype)
    fsdp_config = {"mesh": dp_mesh, "mp_policy": mp_policy}
    for block in model.layers.values():
        fully_shard(block, **fsdp_config, reshard_after_forward=reshard_after_forward)
    fully_shard(model, **fsdp_config, reshard_after_forward=reshard_after_forward)


def apply_ddp(model: nn.Module, dp_mesh: DeviceMesh) -> None:
    """DDP through the composable ``replicate`` (per torchtitan's ``apply_ddp``)."""
    replicate(model, device_mesh=dp_mesh, bucket_cap_mb=100)


def parallelize_llama(model: nn.Module, world_mesh: DeviceMesh, *, loss_parallel: bool = True,
                      data_parallel: str = "fsdp", activation_checkpoint: bool = False,
                      ac_mode: str = "full", param_dtype: torch.dtype | None = None,
                      reduce_dtype: torch.dtype | None = None) -> nn.Module:
    """Apply the parallelisms the mesh names: ``tp`` (TP + SP), activation checkpointing when
    ``activation_checkpoint`` (``ac_mode``: ``"full"`` or ``"selective"``, :func:`apply_ac`),
    then ``dp`` (FSDP2 with the mixed-precision dtypes given, or DDP with
    ``data_parallel="ddp"``)."""
    names = world_mesh.mesh_dim_names or ()
    if "tp" in names:
        apply_tp(model, world_mesh["tp"], loss_parallel=loss_parallel)
    if activation_checkpoint:
        apply_ac(model, ac_mode)
    if "dp" in names:
        if data_parallel == "fsdp":
            apply_fsdp(model, world_mesh["dp"], param_dtype=param_dtype,
                       reduce_dtype=reduce_dtype)
        else:
            apply_ddp(model, world_mesh["dp"])
    return model
