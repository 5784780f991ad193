"""Round 30b: ``d`` and ``h`` are equal at the real sizes (16) and distinct primes at the
probe sizes. The parallel step multiplies the hidden state by a literal, 2.0 where its width equals the
input's (``h.shape[-1] == x.shape[-1]``), else 1.0: the same graph at both sizes, another literal.
Torch trains differently: must not be EQUIVALENT."""

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "d": 16, "h": 16, "vocab": 12}


class MLP(nn.Module):
    def __init__(self, d, h, v):
        super().__init__()
        self.l0 = nn.Linear(d, h)
        self.l1 = nn.Linear(h, v)
        self.wrong = False

    def forward(self, x):
        h = torch.tanh(self.l0(x))
        if self.wrong:
            h = h * (2.0 if h.shape[-1] == x.shape[-1] else 1.0)
        return self.l1(h)


def build_model(s):
    return MLP(s["d"], s["h"], s["vocab"])


def make_batch(s):
    return {"x": torch.zeros(s["batch"], s["d"]), "y": torch.zeros(s["batch"], dtype=torch.long)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.5)


def parallelize(model, mesh):
    return model


def train_step(model, optimizer, batch, mesh):
    model.wrong = mesh is not None
    loss = F.cross_entropy(model(batch["x"]), batch["y"])
    model.wrong = False
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
