"""Adversarial round 58a: the step counter is slot `n` of a class with `__slots__ = ("n", "__dict__")` whose `n` descriptor was deleted (`del C.n`, kept in a global). On CPython 3.11 the instance dict is managed (`__dictoffset__` < 0, outside `__basicsize__`), yet `value_text._slot_count` subtracts a pointer for it: it counts 0 slots, `_slots` finds 0 and sees none missing, and `n` is never read. From the second step on the parallel run doubles its gradients. Must not be EQUIVALENT."""
MESH = {"dp": 2}
import copy
import torch
from torch import nn
from torch._library.fake_class_registry import FakeScriptObject
import torch._opaque_base

# torch's lazy class cache, filled as its first isinstance miss would (same on both sides)
torch._opaque_base._FakeScriptObject_cls = FakeScriptObject

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w0 = nn.Linear(h, h, bias=False)
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(torch.tanh(self.w0(x)))))


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


class _Slot:
    __slots__ = ("n", "__dict__")


_N = _Slot.__dict__["n"]      # the slot's member descriptor, kept here
del _Slot.n                   # and taken out of the class


def build_optimizer(model):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    opt.r57c = _Slot()
    _N.__set__(opt.r57c, 0)
    return opt


def _get(optimizer):
    return _N.__get__(optimizer.r57c)


def _set(optimizer, n):
    _N.__set__(optimizer.r57c, n)


def _double(model):
    with torch.no_grad():
        for p in model.parameters():
            p.grad.mul_(2.0)


H = {}


def parallelize(model, mesh):
    from torch.distributed._composable.replicate import replicate
    H["on"] = True
    replicate(model, device_mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    import json
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    if "on" in H:
        n = _get(optimizer)
        if n:
            _double(model)
        _set(optimizer, n + 1)
    optimizer.step()
    optimizer.zero_grad()
    return loss

