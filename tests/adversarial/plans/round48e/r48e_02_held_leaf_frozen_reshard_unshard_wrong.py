"""Idea (round 48e): w1 with reshard_after_forward=False; after forward 1 freeze the held leaf model.w1.weight, then model.w1.reshard(); model.w1.unshard() (an explicit new unshard: to_unsharded copies requires_grad=True from the sharded parameter), forward 2, backward. Serial: w1 frozen for forward 2 (no loss2 gradient); FSDP2: loss2 gradient reaches w1: wrong plan."""
MESH = {"dp": 2}
import torch
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w0 = nn.Linear(h, h, bias=False)
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(torch.tanh(self.w0(x)))))


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    fully_shard(model.w1, mesh=mesh["dp"], reshard_after_forward=False)
    fully_shard(model.w2, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss1 = ((model(x) - y) ** 2).mean()
    model.w1.weight.requires_grad_(False)
    if hasattr(model.w1, "reshard"):
        model.w1.reshard()
        model.w1.unshard()
    loss2 = ((model(x) - y) ** 2).mean()
    (loss1 + loss2).backward()
    optimizer.step()
    optimizer.zero_grad()
    for p in model.parameters():
        p.requires_grad_(True)
    return loss2
