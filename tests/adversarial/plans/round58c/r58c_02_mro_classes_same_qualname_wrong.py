"""Adversarial round 58c: the step counter is a class attribute of the model's own class, made
in a local factory applied twice (`_mk(_mk(MLP))`): both local classes have the qualname
`_mk.<locals>.Sub`, and `step_state` names each class of the model's MRO `module  class
<qualname>`, so the inner class's body overwrites the outer's entry (the counter's). No name is
forged. From the second step on the parallel run doubles its gradients. Must not be EQUIVALENT."""
MESH = {"dp": 2}
import copy
import functools
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


def _mk(base):
    class Sub(base):
        pass
    return Sub


def build_model(s):
    cls = _mk(_mk(MLP))
    cls.n = 0
    return cls(s["hidden"], s["ffn"])


def build_optimizer(model):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    return opt


def _outer(model):
    # the outer local class (composable replicate puts a DDP class in front of it)
    return next(c for c in type(model).__mro__ if c.__qualname__ == "_mk.<locals>.Sub")


def _get(model):
    return _outer(model).n


def _set(model, n):
    _outer(model).n = n


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
        n = _get(model)
        if n:
            _double(model)
        _set(model, n + 1)
    optimizer.step()
    optimizer.zero_grad()
    return loss

