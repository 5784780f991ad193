"""Idea: a dry-run forward in `parallelize` (a shape check under `no_grad`, after `fully_shard`;
no value changed there, so not R39c-1), and a `train_step` that decays the weights
(`p.mul_(0.99)` over `model.parameters()`, no_grad) before its forward. FSDP2's root (`model`)
is decided at the dry run and keeps its unsharded parameters registered after it (no backward
follows): the decay writes the root's unsharded `w1` (the forward runs on it, but the sharded
`w1` is never decayed: the first backward reshards it away), and the sharded `w2` (a non-root
unit). The stand-in's holds are step state (`release_all` resets them, HOLDS live in the step):
the step starts from the stored parameters, the decay writes the stored `w1`, as the spec.
Truth (torch4_truth.py FILE 2): step 1 w1 9.5e-3 / w2 4e-19, step 2 1.1e-2 / 2.4e-4 (wrong;
the per-step state_dict read does not mask it: the views are held from before step 1).
Verdict (8a4a979): EQUIVALENT (4 goals, 25 s): R43e-3, a false accept.
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
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    fully_shard(model.w2, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    with torch.no_grad():
        model(torch.zeros(1, model.w1.in_features))     # a shape check (dry run)
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
