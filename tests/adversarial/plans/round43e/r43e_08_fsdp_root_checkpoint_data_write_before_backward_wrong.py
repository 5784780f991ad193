"""Idea: activation checkpointing under a root that keeps its unsharded parameters (FSDP2's root,
`reshard_after_forward` left None), with the stored shards halved through `.data` between the
forward and the backward (a hand-written decay on the optimizer's sharded parameters). For
real the checkpoint's recomputation in the backward runs on the root's held unsharded
parameters (the values before the write: the root is not gathered again); the spec's
recomputation reads the halved parameters. `recompute.gathered_then_written` (version
counters) cannot see a `.data` write (R43e-1's root cause through the other check): if the
stand-in's recomputation gathers again, it computes the spec's gradients.
Truth (torch4_truth.py FILE 2): step 1 w1 3.9e-3 / w2 5.6e-3 (wrong); control (the same file
with `reshard_after_forward=True`: FSDP2 gathers again for the recomputation): 1.7e-18 (right).
Verdict (8a4a979): EQUIVALENT (4 goals, 25 s): R43e-4, a false accept.
"""

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def inner(self, x):
        return self.w2(nn.functional.silu(self.w1(x)))

    def forward(self, x):
        return checkpoint(self.inner, x, use_reentrant=False)


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    fully_shard(model, mesh=mesh["dp"])     # the root: keeps its unsharded parameters
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    with torch.no_grad():                   # a decay through .data before the backward
        for p in optimizer.param_groups[0]["params"]:
            p.data.mul_(0.5)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
