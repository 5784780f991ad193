"""Adversarial round 56d: the step counter is the length of the list a bound C method holds: ``json.r56d = [0, ...].append`` rebound each step to the ``append`` of a list one longer. ``process_state._global_text`` sends every ``_NO_CODE`` value but a module or data to ``_ident``, which names a ``builtin_function_or_method`` by its module and qualname (``builtin:None.list.append``): no identity, no ``__self__`` (R56a-3 / R56c-2 read the other kinds by identity). The same for a method-wrapper (``(n).__add__``). No tracer object is reached. From the second step on the parallel run doubles its gradients. Must not be EQUIVALENT."""
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
        n = len(json.r56d.__self__)
        if n:
            _double(model)
        json.r56d = ([0] * (n + 1)).append
    optimizer.step()
    optimizer.zero_grad()
    return loss


import json as _json  # noqa: E402
_json.r56d = [].append     # set when the train file is imported (n = 0)
