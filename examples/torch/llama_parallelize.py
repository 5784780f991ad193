"""torchtitan-style parallelisation of :mod:`llama_model` (after torchtitan's
``models/llama3/infra/parallelize.py``, the DTensor-era ``apply_tp``; written for this project).

``parallelize_llama(model, world_mesh, ...)`` applies tensor parallelism with sequence
parallelism on the ``tp`` axis (``apply_tp``), full activation checkpointing of every block when
asked (``apply_ac``), then FSDP2 on the ``dp`` axes (``apply_fsdp``) or DDP-style ``replicate``
(``apply_ddp``), in torchtitan's order; the train files call it unchanged.
"""

from __future__ import annotations

from torch import nn
from torch.distributed._composable.replicate import replicate
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel, PrepareModuleInput, RowwiseParallel, SequenceParallel, parallelize_module,
)


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


def apply_ac(model: nn.Module) -> None:
    """Full activation checkpointing: every transformer block wrapped in torch's
    ``checkpoint_wrapper`` (non-reentrant; torchtitan's ``apply_ac`` with ``mode="full"``), its
    activations recomputed in the backward."""
    for name, block in list(model.layers.named_children()):
        model.layers.register_module(name, checkpoint_wrapper(block, preserve_rng_state=False))


def apply_fsdp(model: nn.Module, dp_mesh: DeviceMesh, reshard_after_forward: bool = True
               ) -> None:
    """FSDP2 on every transformer block, then on the root (per torchtitan)."""
    for block in model.layers.values():
        fully_shard(block, mesh=dp_mesh, reshard_after_forward=reshard_after_forward)
    fully_shard(model, mesh=dp_mesh, reshard_after_forward=reshard_after_forward)


def apply_ddp(model: nn.Module, dp_mesh: DeviceMesh) -> None:
    """DDP through the composable ``replicate`` (per torchtitan's ``apply_ddp``)."""
    replicate(model, device_mesh=dp_mesh, bucket_cap_mb=100)


def parallelize_llama(model: nn.Module, world_mesh: DeviceMesh, *, loss_parallel: bool = True,
                      data_parallel: str = "fsdp", activation_checkpoint: bool = False
                      ) -> nn.Module:
    """Apply the parallelisms the mesh names: ``tp`` (TP + SP), activation checkpointing when
    ``activation_checkpoint``, then ``dp`` (FSDP2, or DDP with ``data_parallel="ddp"``)."""
    names = world_mesh.mesh_dim_names or ()
    if "tp" in names:
        apply_tp(model, world_mesh["tp"], loss_parallel=loss_parallel)
    if activation_checkpoint:
        apply_ac(model)
    if "dp" in names:
        if data_parallel == "fsdp":
            apply_fsdp(model, world_mesh["dp"])
        else:
            apply_ddp(model, world_mesh["dp"])
    return model
