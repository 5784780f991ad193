"""Round 35c (dp 2, right): a hand-written DDP on a 1-D dp mesh over the default group
(``dist.all_reduce(p.grad)``, ``group=None``: the whole world, which is the dp axis's ranks).
Truth (torch4_truth FILE 2): w1 0.0, w2 2.8e-17. Prove at 761d5b3: EQUIVALENT (4 goals, 28 s): right."""

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
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        for p in model.parameters():   # the default (whole-world) group: the dp axis here
            dist.all_reduce(p.grad)
            p.grad.div_(dist.get_world_size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
