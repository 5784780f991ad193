"""Idea: fully_shard(model.w1, reshard_after_forward=True), fully_shard(model.w2) (two roots).
train_step checkpoints (non-reentrant) f(x) = silu(w1(x) * k) and calls model.w2 on it. In the
backward, silu's saved input triggers the recomputation while w1's state is still IDLE (its
pre-backward hook fires only when the gradient reaches w1's output, after silu's backward), so
torch 2.13 runs w1's full pre-forward and its post_forward does NOT reshard (is_bw()): during the
recomputation model.w1.weight is the unsharded parameter. k = 2 when, inside the backward,
model.w1.weight is not the optimizer's p1: the recomputed saved tensor (2 h) feeds silu's
backward. Spec: always p1 (k = 1). If the stand-in releases w1's views at the recomputation's
post-forward, it reads p1 too.
"""
MESH = {"dp": 2}
import torch
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)))


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    fully_shard(model.w1, mesh=mesh["dp"], reshard_after_forward=True)
    fully_shard(model.w2, mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    from torch.utils.checkpoint import checkpoint
    x, y = batch["x"], batch["y"]
    p1 = optimizer.param_groups[0]["params"][0]

    def f(x):
        h = model.w1(x)
        in_bw = torch._C._current_graph_task_id() != -1
        k = 2.0 if (in_bw and model.w1.weight is not p1) else 1.0
        return nn.functional.silu(h * k)

    a = checkpoint(f, x, use_reentrant=False)
    out = model.w2(a)
    loss = ((out - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
