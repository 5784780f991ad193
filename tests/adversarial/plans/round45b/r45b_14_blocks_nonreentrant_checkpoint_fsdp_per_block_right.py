"""Right plan (torchtitan-style): two residual MLP blocks, each under a non-reentrant checkpoint
in the model's forward, fully_shard per block + root (w_in, w_out at the root). Needless
refusal check for stop 45's recomputation changes."""
MESH = {"dp": 2}
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class Block(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return x + self.w2(nn.functional.silu(self.w1(x)))


class Model(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w_in = nn.Linear(h, h, bias=False)
        self.blocks = nn.ModuleList([Block(h, f) for _ in range(2)])
        self.w_out = nn.Linear(h, h, bias=False)

    def forward(self, x):
        x = self.w_in(x)
        for b in self.blocks:
            x = checkpoint(b, x, use_reentrant=False)
        return self.w_out(x)


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_model(s):
    return Model(s["hidden"], s["ffn"])


def build_optimizer(model):
    return torch.optim.AdamW(model.parameters(), lr=0.01)


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    for b in model.blocks:
        fully_shard(b, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
