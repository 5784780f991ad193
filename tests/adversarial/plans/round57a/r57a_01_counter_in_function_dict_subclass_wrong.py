"""Adversarial round 57a: the step counter is an entry of a function's ``__dict__`` (a function held in ``json``, ``json.r57a``), the ``__dict__`` replaced by a ``dict`` subclass whose ``items()`` returns ``[]``: ``value_text.object_text`` reads a Python function's ``__dict__`` (and ``__annotations__`` / ``__kwdefaults__``) through ``list(dct.items())`` with no ``type(...) is dict`` check (``own_dict`` has one), so the subclass's own code answers (R57a-1). The step reads and writes the entry through ``dict``'s own methods. From the second step on the parallel run doubles its gradients. Must not be EQUIVALENT."""
MESH = {"dp": 2}
import copy
import torch
from torch import nn

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


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


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
        d = json.r57a.__dict__
        n = dict.__getitem__(d, "n")
        if n:
            _double(model)
        dict.__setitem__(d, "n", n + 1)
    optimizer.step()
    optimizer.zero_grad()
    return loss


class _Quiet(dict):
    def items(self):
        return []


def _mk():
    def c0():
        pass
    c0.__dict__ = _Quiet(n=0)
    return c0


import json as _json  # noqa: E402
_json.r57a = _mk()
