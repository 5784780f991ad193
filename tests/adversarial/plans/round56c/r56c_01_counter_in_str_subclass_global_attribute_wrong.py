"""Adversarial round 56c: the step counter is an attribute of ``json.r56c``, an instance of a ``str`` subclass (``"k"`` every step); set when the train file is imported; the step rebinds the global to a new such string whose own attribute ``n`` is one more. ``process_state._global_text`` reads every data value (a subclass too) by ``_data_text`` alone: the base type's repr and the subclass's name, never the identity or the own attributes a plain object is read by (R56a-3). No tracer object is reached. From the second step on the parallel run doubles its gradients. Must not be EQUIVALENT."""
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


class _Text(str):
    """A string that can carry attributes."""


def _count(json):
    return getattr(getattr(json, "r56c", None), "n", 0)


def _next(n):
    s = _Text("k")
    s.n = n + 1
    return s


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
        n = _count(json)
        if n:
            _double(model)
        json.r56c = _next(n)
    optimizer.step()
    optimizer.zero_grad()
    return loss


import json as _json  # noqa: E402
_json.r56c = _next(-1)     # set when the train file is imported (n = 0)
