"""Round 36a (dp 2 x tp 2, right): the tp groups count-named (every rank makes every tp
group, Megatron's loop), the dp groups made after them with use_local_synchronization=True by
their members only. Every rank is in one tp group, so each dp group's members hash the same
len(_world.pg_names) and name it alike; the local calls leave _world.group_count alone.
EQUIVALENT expected (false refusal otherwise).

Truth (tp_truth.py FILE): 6.9e-18 on every rank (right).
Verdict at a88d2d1: EQUIVALENT (4 goals, 29 s): right.
"""

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.tensor import Shard, distribute_tensor

MESH = {"dp": 2, "tp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}
_G = {}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)))


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def make_batch(s):
    return {"x": torch.zeros(s["batch"], s["hidden"]), "y": torch.zeros(s["batch"], s["hidden"])}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def _build_groups():
    rank, dp, tp = dist.get_rank(), MESH["dp"], MESH["tp"]
    for i in range(dp):    # Megatron's loop: every rank makes every tp group (count-named)
        g = dist.new_group([i * tp + j for j in range(tp)])
        if rank // tp == i:
            _G["tp"] = g
    for j in range(tp):    # use_local_synchronization: only the members call
        dp_ranks = [k * tp + j for k in range(dp)]
        if rank in dp_ranks:
            _G["dp"] = dist.new_group(dp_ranks, use_local_synchronization=True)


class _ReduceFromTP(torch.autograd.Function):
    """Megatron's reduce-from-model-parallel region: all-reduce forward, identity backward."""

    @staticmethod
    def forward(ctx, x):
        x = x.clone()
        dist.all_reduce(x, group=_G["tp"])
        return x

    @staticmethod
    def backward(ctx, g):
        return g


def parallelize(model, mesh):
    tp = mesh["tp"]
    model.w1.weight = nn.Parameter(distribute_tensor(model.w1.weight.detach(), tp, [Shard(0)]))
    model.w2.weight = nn.Parameter(distribute_tensor(model.w2.weight.detach(), tp, [Shard(1)]))
    _build_groups()
    return model


def train_step(model, optimizer, batch, mesh):
    x = batch["x"]
    if mesh is None:
        out = model(x)
    else:   # column-parallel w1, row-parallel w2, all-reduce of the partial output over tp
        w1, w2 = model.w1.weight.to_local(), model.w2.weight.to_local()
        out = _ReduceFromTP.apply(nn.functional.silu(x @ w1.t()) @ w2.t())
    loss = ((out - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:   # hand-written DDP over the dp group of each tp-local gradient block
        g = _G["dp"]
        for p in model.parameters():
            grad = p.grad.to_local()
            dist.all_reduce(grad, group=g)
            grad.div_(dist.get_world_size(group=g))
    optimizer.step()
    optimizer.zero_grad()
    return loss
