"""Round 30c (control of r30c_03, right file): r30b_01 with the twin layout going into a matmul instead
of an elementwise add: ``s.t() @ m`` (single-device) vs ``s @ m`` (parallel), s =
m.sum(0).expand(h, h). Torch trains differently: must not be EQUIVALENT."""


import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 4, "d": 2, "h": 3, "vocab": 2}


class MLP(nn.Module):
    def __init__(self, d, h, v):
        super().__init__()
        self.l0 = nn.Linear(d, h)
        self.register_buffer("m", torch.randn(h, h))
        self.l1 = nn.Linear(h, v)
        self.wrong = False

    def forward(self, x):
        h = self.l0(x)
        m = self.m
        n = m.shape[0]
        s = m.sum(0).expand(n, n)
        w_eff = (s if self.wrong else s.t()) @ m
        h = F.linear(h, w_eff)
        return self.l1(h)


def build_model(s):
    return MLP(s["d"], s["h"], s["vocab"])


def make_batch(s):
    return {"x": torch.zeros(s["batch"], s["d"]), "y": torch.zeros(s["batch"], s["vocab"])}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.5)


def parallelize(model, mesh):
    return model


def train_step(model, optimizer, batch, mesh):
    model.wrong = False                     # right: both steps use s.t() @ m
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    model.wrong = False
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
