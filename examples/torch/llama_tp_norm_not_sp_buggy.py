"""BUG: the FFN norm is left out of SequenceParallel (torchtitan's plan lists every norm).

The norm then runs as a plain module on the rank's sequence shard: its weight's gradient is
summed over that shard only and never all-reduced over tp. ``prove --torch`` refutes it naming
``grad:layers.*.ffn_norm.weight`` and the missing factor.
"""

import contextlib

import torch
import torch.nn.functional as F
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel, PrepareModuleInput, RowwiseParallel, SequenceParallel, loss_parallel,
    parallelize_module,
)

from llama_model import ModelArgs, Transformer

MESH = {"tp": 2}
SIZES = {"batch": 2, "seq": 16, "n_kv_heads": 2, "n_rep": 2, "head_dim": 8, "ffn": 48,
         "vocab": 64}


def build_model(s):
    heads = s["n_kv_heads"] * s["n_rep"]
    return Transformer(ModelArgs(dim=heads * s["head_dim"], n_layers=2, n_heads=heads,
                                 n_kv_heads=s["n_kv_heads"], vocab_size=s["vocab"],
                                 ffn_hidden=s["ffn"], max_seq_len=s["seq"]))


def make_batch(s):
    return {"tokens": torch.zeros(s["batch"], s["seq"], dtype=torch.long),
            "labels": torch.zeros(s["batch"], s["seq"], dtype=torch.long)}


def build_optimizer(model):
    # foreach=False: torch.optim would otherwise fail on the mixed Tensor / DTensor parameters
    return torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, foreach=False)


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
            # "ffn_norm": SequenceParallel(),       <- forgotten
            "feed_forward": PrepareModuleInput(input_layouts=(Shard(1),),
                                               desired_input_layouts=(Replicate(),)),
            "feed_forward.w1": ColwiseParallel(),
            "feed_forward.w2": RowwiseParallel(output_layouts=Shard(1)),
            "feed_forward.w3": ColwiseParallel(),
        })
    return model


def train_step(model, optimizer, batch, mesh):
    with loss_parallel() if mesh is not None else contextlib.nullcontext():
        pred = model(batch["tokens"])
        loss = F.cross_entropy(pred.flatten(0, 1).float(), batch["labels"].flatten(0, 1))
        loss.backward()
    # (no clip_grad_norm_: with it, torch itself fails on the mixed Tensor / DTensor grads)
    optimizer.step()
    optimizer.zero_grad()
    return loss
