"""Round 10 adversarial train file: a `__slots__` object whose slot is private (`__slots__ = ("__scale",)`, stored under the mangled name `_Scale__scale`), changed by the parallel step only (the class is local to a function, the instance a global). `_Encoder._attrs` looks slots up by their written name (`hasattr(v, "__scale")` is False), so it never reads it.
Wrong from step 2 on."""

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


def _make_scale():
    # the class is local: a slotted class among the globals is read by the `type` branch,
    # whose member descriptor is unreadable (UNKNOWN); its instance is read by `_attrs`
    class Scale:
        __slots__ = ("__scale",)

        def __init__(self):
            self.__scale = 1.0

        def get(self):
            return self.__scale

        def set(self, v):
            self.__scale = v

    return Scale()


_S = _make_scale()


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x))) * _S.get()


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
        _S.set(0.5)
    return loss
