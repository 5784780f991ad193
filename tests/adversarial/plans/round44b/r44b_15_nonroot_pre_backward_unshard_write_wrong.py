"""Idea: a non-root unit b (reshard_after_forward left None: True for a non-root) over
Linear l1, tanh, Linear l2. For real b's pre_backward (hook on b's output) all-gathers again
and registers the unsharded parameters until b's post_backward (after l1's backward). A
tensor hook on l1's output (runs after l2's backward, inside b's backward) halves
l2.weight under no_grad: for real it writes the unsharded copy (lost at the reshard); the
spec halves the parameter; the stand-in registers the stored parameter after the forward
and does not model the pre-backward unshard.
Truth: wrong, b.l2.weight 0.16 / 0.23. Verdict (ac24550): exit 3 (9 s, 'written in place
between its all-gather for the forward and the backward'): sound.
"""
MESH = {"dp": 2}
import torch
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class Block(nn.Module):
    def __init__(self, f, h):
        super().__init__()
        self.l1 = nn.Linear(f, f, bias=False)
        self.l2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        u = self.l1(x)
        if u.requires_grad:
            u.register_hook(self.hook)
        return self.l2(torch.tanh(u))

    def hook(self, g):
        with torch.no_grad():
            self.l2.weight.mul_(0.5)
        return g


class M(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.a = nn.Linear(h, f, bias=False)
        self.b = Block(f, h)

    def forward(self, x):
        return self.b(nn.functional.silu(self.a(x)))


def build_model(s):
    return M(s["hidden"], s["ffn"])


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    fully_shard(model.b, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
