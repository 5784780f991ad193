"""Idea (round 49a): a hook on the loss queues an autograd callback before FSDP2's root pre-backward queues its final callback, so for real it runs first: the root's w0 (resharded only in the final callback, x needs no grad) is still allocated (a kept reference's size != 0). Doubling (parallel only) when so: wrong; false accept if the stand-in frees w0 before user callbacks."""
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

SEEN = []


def double(model):
    with torch.no_grad():
        for p in model.parameters():
            if p.grad is not None:
                p.grad.mul_(2.0)


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    fully_shard(model.w1, mesh=mesh["dp"])
    fully_shard(model.w2, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model

SZ = []


def build_model(s):
    m = MLP(s["hidden"], s["ffn"])
    m.register_forward_hook(lambda mod, a, o: SEEN.append(mod.w0.weight))
    return m


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    w = SEEN[-1]

    def cb():
        SZ.append(w.untyped_storage().size())

    def on_loss(g):
        torch.autograd.Variable._execution_engine.queue_callback(cb)
        return g

    loss.register_hook(on_loss)
    loss.backward()
    live = bool(SZ) and SZ[-1] != 0
    SZ.clear()
    SEEN.clear()
    if mesh is not None and live:
        double(model)
    optimizer.step()
    optimizer.zero_grad()
    return loss
