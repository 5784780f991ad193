"""Idea: `fully_shard([model, model.w1])`: FSDP2 keeps only the root modules of the list
(`_get_root_modules`), so the state manages the single module `model` and may be the root
(as `fully_shard(model)`). The stand-in sets `_group = len(list) = 2` and refuses the root.
Truth (torch4_truth.py FILE 2): right, both steps (max 5.6e-17).
Verdict (94887be): exit 3 (13 s, the same group-root refusal): R43g-2, a false refusal
(`_group` counts the list, not `_get_root_modules` of it).
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


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    fully_shard([model, model.w1], mesh=mesh["dp"])   # FSDP2 keeps [model]: one root module
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
