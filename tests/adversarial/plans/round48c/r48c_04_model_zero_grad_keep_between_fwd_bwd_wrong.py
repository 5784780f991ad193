"""Idea (round 48c): fwd1/bwd1, fwd2, model.zero_grad(set_to_none=False), bwd2: serial grads are g2; for real the root'\''s module holds its unsharded leaf (grad None) between forward and backward, so the sharded w0'\''s g1 is not zeroed and w0 gets g1+g2 (wrong?); w1/w2 (resharded) are zeroed."""
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
    fully_shard(model.w1, mesh=mesh["dp"])
    fully_shard(model.w2, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model

FIRED = []

STATE = {"mesh": False}

def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    loss = ((model(x * 0.5) - y) ** 2).mean()
    model.zero_grad(set_to_none=False)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
