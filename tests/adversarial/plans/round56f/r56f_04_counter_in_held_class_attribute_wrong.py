"""Adversarial round 56f: the step counter is an attribute of a class held in ``json`` (``json.r56f``, made by ``type()``, held by no train-file global), set in place each step (``C.n = n + 1``): ``object_text`` reads own attributes through ``own_dict``, which gives None for a class (``vars(C)`` is a ``mappingproxy``), so only the class's name and identity are read, against docs/torch.md's "a class ... read by identity and own attributes" (R56f-4). From the second step on the parallel run doubles its gradients. Must not be EQUIVALENT."""
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
        c = json.r56f
        n = c.n
        if n:
            _double(model)
        c.n = n + 1
    optimizer.step()
    optimizer.zero_grad()
    return loss


import json as _json  # noqa: E402
_json.r56f = type("R56fC", (), {"n": 0})
