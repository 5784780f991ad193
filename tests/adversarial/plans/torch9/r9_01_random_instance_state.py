"""Round 9 adversarial train file: a `random.Random` instance (a global of the train file) whose Mersenne state the parallel
step advances; the forward scales by 0.5 once its state has moved. A Python subclass of a C type:
`_Encoder` reads its `__dict__` (`gauss_next`) only, not its C state.
Wrong from step 2 on."""

import random
import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}
_RNG = random.Random(0)
_START = _RNG.getstate()


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        scale = 1.0 if _RNG.getstate() == _START else 0.5
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
    if mesh is not None:
        _RNG.random()
    return loss
