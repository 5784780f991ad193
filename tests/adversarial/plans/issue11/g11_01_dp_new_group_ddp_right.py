"""Issue 11 (dp 2, right): examples/torch/mlp_ddp.py with the gradient all-reduce over a group
the train file makes with ``dist.new_group`` of the rank's data-parallel ranks (every rank).
Truth (tests/adversarial/torch4_truth.py FILE 2): w1 0.0, w2 2.8e-17. Was UNKNOWN ("process
group '1' is not one of the mesh's axes", 55 s); with new_groups.py EQUIVALENT (4 goals, 68 s)."""

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}
_G = {}


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
    return {"x": torch.zeros(s["batch"], s["hidden"]), "y": torch.zeros(s["batch"], s["hidden"])}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    _G["dp"] = dist.new_group(ranks=list(range(dist.get_world_size())))
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        g = _G["dp"]
        for p in model.parameters():
            dist.all_reduce(p.grad, group=g)
            p.grad.div_(dist.get_world_size(group=g))
    optimizer.step()
    optimizer.zero_grad()
    return loss
