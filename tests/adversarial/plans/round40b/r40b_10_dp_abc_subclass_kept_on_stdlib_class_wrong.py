"""Idea (r40b_08 with the keep-alive in a stdlib class): R39a-6 reads an abstract base's own
registry, but `issubclass(C, Base)` also asks every subclass of `Base` (`__subclasses__()`,
recursively, each with its own registry). The model
derives from the train file's `Model(nn.Module, abc.ABC)`; the parallel step makes a new
subclass `Sub(Model)` (not `Model.register`: `Model`'s registry is unchanged), registers `Cfg`
with it and keeps `Sub` alive as an attribute of the standard library's `numbers.Number` class (a
class of a module outside the train file's, read by name: R40b-2's family), so neither
`sys.modules` (R40b-5) nor the train file's state holds it. `forward` scales by 0.5 when
`isinstance(self.cfg, Model)`: true on the ranks from step 2 on.
Truth (torch4_truth.py FILE 2): step 1 5.6e-17 / 0, step 2 w1 0.0027 / w2 0.0051.
Verdict at 1510d44: EQUIVALENT (4 goals, 31 s): false accept R40b-4 (without R40b-5).
"""
MESH = {"dp": 2}
import abc
import numbers

import torch
import torch.distributed as dist
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class Model(nn.Module, abc.ABC):
    @abc.abstractmethod
    def forward(self, x):
        ...


class Cfg:
    width = 1


class MLP(Model):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)
        self.cfg = Cfg()

    def forward(self, x):
        y = self.w2(nn.functional.silu(self.w1(x)))
        return y * 0.5 if isinstance(self.cfg, Model) else y


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    return model


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
        if not hasattr(numbers.Number, "_r40b_keep"):
            class Sub(Model):
                def forward(self, x):
                    return x

            Sub.register(Cfg)
            numbers.Number._r40b_keep = Sub
    optimizer.step()
    optimizer.zero_grad()
    return loss
