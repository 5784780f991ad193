"""An MLP block unit applied twice (block(block(h))), and on two branches; right for real."""
MESH = {"dp": 2}
import torch
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class Block(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.up = nn.Linear(h, f, bias=False)
        self.down = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return x + self.down(nn.functional.silu(self.up(x)))


class Net(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w0 = nn.Linear(h, f, bias=False)
        self.w3 = nn.Linear(f, h, bias=False)
        self.blk = Block(h, f)

    def forward(self, x):
        h = self.w3(nn.functional.silu(self.w0(x)))
        a = self.blk(self.blk(h))
        b = self.blk(h * 0.5)
        return a + b


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_model(s):
    return Net(s["hidden"], s["ffn"])


def build_optimizer(model):
    return torch.optim.AdamW(model.parameters(), lr=0.01)


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    fully_shard(model.blk, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
