"""Adversarial round 56c: the step counter is the value a function global of another module closes over (set when the train file is imported): the step rebinds ``json.r56c`` to ``_make(n + 1)``, a closure of the same code (``lambda: k``). ``process_state._global_text`` names a function by its module, name, file, line and bytecode only (``_ident``; R56a-3 reads plain objects by identity, not functions), never its closure cells, defaults or identity. No tracer object is reached. From the second step on the parallel run doubles its gradients. Must not be EQUIVALENT."""
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


def _make(k):
    return lambda: k


def _count(json):
    f = getattr(json, "r56c", None)
    return f() if f is not None else 0


def _next(n):
    return _make(n + 1)


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
