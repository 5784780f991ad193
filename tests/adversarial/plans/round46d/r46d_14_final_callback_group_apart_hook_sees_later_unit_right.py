"""Idea (round 46d, R46c-2): group [w0, w2] (members apart: unit w1 between them in the module tree) and unit
w1, both taking the batch x: both post-backwards run in the root's final callback, the group's first
(all_states: module order, the group met at w0). A hook on w2.weight doubles its gradient when model.w1.weight
is a DTensor: for real w1 is not resharded yet (Parameter) -> not doubled; one device the same. Right plan."""
MESH = {"dp": 2}
import torch
from torch import nn
from torch.distributed.tensor import DTensor

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w0 = nn.Linear(h, f, bias=False)
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w0(x) + torch.tanh(self.w1(x))))


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
    fully_shard([model.w0, model.w2], mesh=mesh["dp"])
    fully_shard(model.w1, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]

    def hook(p):
        if isinstance(model.w1.weight, DTensor):
            p.grad.mul_(2.0)

    h = model.w2.weight.register_post_accumulate_grad_hook(hook)
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    h.remove()
    model.w2.weight._post_accumulate_grad_hooks = None   # as before the step
    optimizer.step()
    optimizer.zero_grad()
    return loss
