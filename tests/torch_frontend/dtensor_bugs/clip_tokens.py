"""A train file that clips gradients which are still ``Partial(sum)`` (the situation of pytorch
PR #159856): a position-wise linear under ``SequenceParallel`` sees each rank's block of the
sequence, so the gradient of its replicated weight is a partial sum over the ranks, and
``clip_grad_norm_`` takes its norm. Torch 2.13's norm rule all-reduces the partial sums first
(the norm of the sum); ``prove --torch`` proves this file EQUIVALENT.
``clip_tokens_159856_buggy.py`` runs it under the faulty rule that PR fixed
(``dtensor_faults.py``): the sum of the ranks' norms.

Each rank's loss is the squared error of its own tokens over the global token count, so the
ranks' losses (and gradients) sum to the single-device ones (Megatron's sequence-parallel
convention); the loss itself differs per rank and is not a goal.
"""

import torch
from torch import nn
from torch.distributed.tensor.parallel import SequenceParallel, parallelize_module

MESH = {"tp": 2}
SIZES = {"batch": 2, "seq": 4, "hidden": 6}
DATA_SHARDING = {"x": {"tp": 1}, "y": {"tp": 1}}     # each rank its block of the sequence


class TokenMap(nn.Module):
    def __init__(self, h):
        super().__init__()
        self.w = nn.Linear(h, h, bias=False)

    def forward(self, x):                     # x: [batch, seq, hidden]
        return self.w(x)


def build_model(s):
    return TokenMap(s["hidden"])


def make_batch(s):
    return {"x": torch.zeros(s["batch"], s["seq"], s["hidden"]),
            "y": torch.zeros(s["batch"], s["seq"], s["hidden"])}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    parallelize_module(model, mesh["tp"], {"w": SequenceParallel(use_local_output=True)})
    return model


def train_step(model, optimizer, batch, mesh):
    z = model(batch["x"])
    tokens = batch["y"].numel() * (mesh["tp"].size() if mesh is not None else 1)
    loss = ((z - batch["y"]) ** 2).sum() / tokens
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.01)
    optimizer.step()
    optimizer.zero_grad()
    return loss
