"""BUG: wrong ``output_layouts``: tensor parallelism without sequence parallelism, where the
attention's row-parallel ``wo`` declares ``output_layouts=Partial()``: DTensor then never
all-reduces the partial sums, and each rank adds only its heads' share to the residual stream.

``prove --torch`` refutes the loss (plan / spec is not a constant factor) and every gradient
below it, at the ``train_step`` line.
"""

import torch
from torch.distributed.tensor import Partial, Replicate
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

import llama_common
from llama_common import SIZES, make_batch  # noqa: F401

MESH = {"tp": 2}


def build_model(s):
    return llama_common.build_model(s)


def build_optimizer(model):
    # the per-parameter AdamW: the embedding and the norms stay plain tensors here, and the
    # foreach kernels refuse a mix of DTensor and plain tensors
    return torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, foreach=False)


def parallelize(model, mesh):
    tp = mesh["tp"]
    parallelize_module(model, tp, {"output": ColwiseParallel(output_layouts=Replicate())})
    for block in model.layers.values():
        parallelize_module(block, tp, {
            "attention.wq": ColwiseParallel(), "attention.wk": ColwiseParallel(),
            "attention.wv": ColwiseParallel(),
            "attention.wo": RowwiseParallel(output_layouts=Partial()),   # BUG: Replicate()
            "feed_forward.w1": ColwiseParallel(), "feed_forward.w3": ColwiseParallel(),
            "feed_forward.w2": RowwiseParallel(),
        })
    return model


def train_step(model, optimizer, batch, mesh):
    # no clipping: the norms and the embedding stay plain tensors here, and clip_grad_norm_
    # refuses a mix of DTensor and plain gradients
    return llama_common.train_step(model, optimizer, batch, mesh, parallel_loss=False,
                                   max_norm=None)
