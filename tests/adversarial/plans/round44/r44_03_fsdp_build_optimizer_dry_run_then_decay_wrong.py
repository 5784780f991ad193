"""Stop 44 (dp 2, wrong): r43e_07 (R43e-3) with the dry-run forward moved from parallelize into
build_optimizer (after parallelize, before the first step): FSDP2's root decides there and
keeps its unsharded parameters registered into step 1, where the decay writes the held `w1`.
The forward guard covers the traced build_optimizer too: exit 3.
Truth (torch4_truth.py FILE 2): step 1 w1 9.5e-3, step 2 w1 0.011 / w2 2.4e-4 (wrong). Verdict: exit 3 at
a9166a7 by another check (50 s, "leaves the gradient of 'w1.weight' set"); exit 3 since stop 44 (14 s).
"""
import torch
from torch import nn

MESH = {"dp": 2}
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
    with torch.no_grad():
        model(torch.zeros(1, model.w1.in_features, device=model.w1.weight.device))  # dry run
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    fully_shard(model.w2, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    with torch.no_grad():                               # decoupled weight decay first
        for p in model.parameters():
            p.mul_(0.99)
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
