"""Round 9 adversarial train file: a `collections.defaultdict` global read at a new key each
step (a step counter both sides advance alike); the parallel step replaces its `default_factory`
(a C member, not in `__dict__`: the encoder reads the items only).
Wrong from step 2 on."""

import collections

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}
_SCALES = collections.defaultdict(lambda: 1.0)
_STEP = [0]


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        scale = _SCALES[_STEP[0]]
        return self.w2(nn.functional.silu(self.w1(x))) * scale


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
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    _STEP[0] += 1
    if mesh is not None:
        _SCALES.default_factory = lambda: 0.5
    return loss
