"""Idea: a group `fully_shard([model.body[0], model.head])` whose member `body[0]` lies under the
root `fully_shard(model.body)` (the first unit to run) while `head` does not. FSDP2's root lazy
init walks `body.modules()`, finds the group's state and makes it a non-root; `head`'s forward
then finds the group already non-root. The stand-in decides root per member: `head` is under no
root, so it is taken for a group root and refused.
Truth (torch4_truth.py FILE 2): right, both steps (max 1.4e-17).
Verdict (94887be): exit 3 (13 s, "this fully_shard group of modules runs its forward
first and so is FSDP2's root"): R43g-1, a false refusal.
"""
MESH = {"dp": 2}
import torch
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(h, f, bias=False), nn.SiLU(),
                                  nn.Linear(f, f, bias=False))
        self.head = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.head(self.body(x))


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
    fully_shard([model.body[0], model.head], mesh=mesh["dp"])   # one state, two modules
    fully_shard(model.body, mesh=mesh["dp"])                    # the root: runs first
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
