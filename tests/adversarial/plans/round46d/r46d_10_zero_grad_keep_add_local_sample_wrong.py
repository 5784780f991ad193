"""Idea (round 46d, R46c-3): zero_grad(set_to_none=False) keeps w1's zero gradient (constant along ffn, the
sharded dim). Then + the first sample of the batch along hidden: under FSDP2 each rank adds ITS first sample
to its block (x[0] on rank 0, x[4] on rank 1), on one device x[0] everywhere. Wrong plan."""
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
    fully_shard(model.w2, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    from torch.distributed.tensor import DTensor
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=False)
    with torch.no_grad():
        g = model.w1.weight.grad
        if isinstance(g, DTensor):
            g.to_local().add_(x[0])     # this rank's first sample: x[0] on rank 0, x[4] on rank 1
        else:
            g.add_(x[0])
    return loss
