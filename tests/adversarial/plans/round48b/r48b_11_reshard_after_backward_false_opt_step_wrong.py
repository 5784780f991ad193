"""Idea (round 48b): set_reshard_after_backward(False) on w1 (parallel only), then forward/backward, optimizer.step, forward/backward, optimizer.step in one step: real FSDP2 keeps w1 unsharded after backward 1, so forward 2's unshard is a no-op and reads the pre-step w1 (stale); the stand-in would refill."""
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


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    fully_shard(model.w1, mesh=mesh["dp"], reshard_after_forward=True)
    fully_shard(model.w2, mesh=mesh["dp"], reshard_after_forward=True)
    fully_shard(model, mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    if mesh is not None:
        model.w1.set_reshard_after_backward(False)
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    if mesh is not None:
        model.w1.set_reshard_after_backward(True)
    optimizer.step()
    optimizer.zero_grad()
    return loss
