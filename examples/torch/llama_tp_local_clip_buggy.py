"""BUG: clipping on local shards: the gradient norm is computed from each rank's local shards
(``to_local()``), so every rank clips with its own coefficient instead of the global norm's.
The max norm is small, so clipping is active on every input.

``prove --torch`` refutes the gradients handed to the optimizer: the sequence-parallel norms'
partial gradients, each scaled by its rank's own coefficient before they are summed (not a
constant factor), at the backward's line.
"""

import contextlib

import torch
import torch.nn.functional as F
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.parallel import loss_parallel

import llama_common
from llama_common import SIZES, build_optimizer, make_batch  # noqa: F401
from llama_parallelize import parallelize_llama

MESH = {"tp": 2}
MAX_NORM = 1e-3


def build_model(s):
    return llama_common.build_model(s)


def parallelize(model, mesh):
    return parallelize_llama(model, mesh)


def train_step(model, optimizer, batch, mesh):
    with loss_parallel() if mesh is not None else contextlib.nullcontext():
        pred = model(batch["tokens"])
        loss = F.cross_entropy(pred.flatten(0, 1).float(), batch["labels"].flatten(0, 1))
        loss.backward()
    grads = [p.grad.to_local() if isinstance(p.grad, DTensor) else p.grad
             for p in model.parameters()]
    # BUG on the parallel model: the norm of the local shards, not of the whole gradients
    norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
    coef = torch.clamp(MAX_NORM / (norm + 1e-6), max=1.0)
    for g in grads:
        g.mul_(coef)
    optimizer.step()
    optimizer.zero_grad()
    return loss
