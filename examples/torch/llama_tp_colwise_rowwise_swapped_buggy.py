"""BUG: ColwiseParallel and RowwiseParallel swapped on the feed-forward pair: torchtitan's plan
shards ``w1`` by columns (its output features) and ``w2`` by rows (its input features); this
file writes ``w1: RowwiseParallel()`` and ``w2: ColwiseParallel(output_layouts=Shard(1))``
(the keyword arguments stay where they were, ``w3`` is left as it was).

``w1`` then all-reduces a full ``[batch, seq, ffn]`` output on every rank while ``w3`` still
gives the rank's ``ffn / tp`` columns, and the gate ``silu(w1(x)) * w3(x)`` multiplies tensors
of different widths: torch itself refuses the program while ``prove --torch`` traces it, and
the answer is one line naming the ``feed_forward`` line of ``llama_model.py`` (exit 3, before
any verdict; ``docs/torch.md``, "A Colwise / Rowwise pairing swapped").
"""

import torch
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel, PrepareModuleInput, RowwiseParallel, SequenceParallel, parallelize_module,
)

import llama_common
from llama_common import SIZES, build_model, build_optimizer, make_batch  # noqa: F401

MESH = {"tp": 2}


def parallelize(model, mesh):
    tp = mesh["tp"]
    parallelize_module(model, tp, {
        "tok_embeddings": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
        "norm": SequenceParallel(),
        "output": ColwiseParallel(input_layouts=Shard(1), output_layouts=Shard(-1),
                                  use_local_output=False),
    })
    for block in model.layers.values():
        parallelize_module(block, tp, {
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
            "feed_forward.w1": RowwiseParallel(),                            # BUG: Colwise
            "feed_forward.w2": ColwiseParallel(output_layouts=Shard(1)),     # BUG: Rowwise
            "feed_forward.w3": ColwiseParallel(),
        })
    return model


def train_step(model, optimizer, batch, mesh):
    return llama_common.train_step(model, optimizer, batch, mesh)
