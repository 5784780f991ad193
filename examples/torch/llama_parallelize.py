"""torchtitan-style parallelisation of :mod:`llama_model` (after torchtitan's
``models/llama3/infra/parallelize.py``, the DTensor-era ``apply_tp``; written for this project).

``parallelize_llama(model, world_mesh, ...)`` applies tensor parallelism with sequence
parallelism on the ``tp`` axis (``apply_tp``), FSDP2 on the ``dp`` axes (``apply_fsdp``) or
DDP-style ``replicate`` (``apply_ddp``); the train files call it unchanged.
"""

from __future__ import annotations

from torch import nn
from torch.distributed._composable.replicate import replicate
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
                      data_parallel: str = "fsdp") -> nn.Module:
    """Apply the parallelisms the mesh names: ``tp`` (TP + SP), then ``dp`` (FSDP2, or DDP with
    ``data_parallel="ddp"``)."""
    names = world_mesh.mesh_dim_names or ()
    if "tp" in names:
        apply_tp(model, world_mesh["tp"], loss_parallel=loss_parallel)
    if "dp" in names:
        if data_parallel == "fsdp":
            apply_fsdp(model, world_mesh["dp"])
        else:
            apply_ddp(model, world_mesh["dp"])
    return model
