"""Adversarial round 56c: the step counter is a global of a module object that is not in ``sys.modules`` (set when the train file is imported): the step rebinds ``json.r56c`` to a new ``types.ModuleType("r56c")`` whose global ``n`` is one more. ``process_state._ident`` names such a module ``module:r56c(a copy)`` (its name only) and ``_global_text`` returns that for every module: no identity, no globals. No tracer object is reached. From the second step on the parallel run doubles its gradients. Must not be EQUIVALENT."""
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


def _count(json):
    return getattr(getattr(json, "r56c", None), "n", 0)


def _next(n):
    import types
    m = types.ModuleType("r56c")
    m.n = n + 1
    return m


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
