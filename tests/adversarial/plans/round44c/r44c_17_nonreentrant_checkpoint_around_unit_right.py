"""Control for R44c-8 (stop 45): r44c_16 without the identity read. A non-reentrant checkpoint
around f(x) = silu(w1(x)) where w1 is its own fully_shard unit (reshard_after_forward=True) and
w2 another root: the recomputation in the backward runs w1's pre-forward again and keeps its
unsharded parameters registered (FSDP2's post_forward does not reshard when is_bw()). Values
are those of the single-device step: right.
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

    def f(x):
        return nn.functional.silu(model.w1(x))

    a = checkpoint(f, x, use_reentrant=False)
    out = model.w2(a)
    loss = ((out - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
