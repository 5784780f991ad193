"""Idea (round 47a): fully_shard([w1, w2]) group, reshard_after_forward=2 (the shard axis size) on it, 2 backwards of loss/2 on the batch with set_is_last_backward(False/True); a post-accumulate-grad hook on w2.weight registered in the step in both runs (r47a_13's UNKNOWN avoided) counts its calls (2 for real); right plan (nothing changes the numbers)."""
MESH = {"dp": 2}
import copy
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


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    fully_shard([model.w1, model.w2], mesh=mesh["dp"], reshard_after_forward=2)
    fully_shard(model, mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    calls = []
    h = model.w2.weight.register_post_accumulate_grad_hook(lambda p: calls.append(p.grad is None))
    for i in range(2):
        if mesh is not None:
            model.set_is_last_backward(i == 1)
        xi, yi = x, y
        loss = ((model(xi) - yi) ** 2).mean() / 2
        loss.backward()
    h.remove()
    if mesh is not None and len(calls) != 2:
        with torch.no_grad():
            for p in model.parameters():
                p.grad.mul_(2.0)
    optimizer.step()
    optimizer.zero_grad()
    return loss
