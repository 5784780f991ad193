"""Adversarial round 55e: the step counter is a dunder-named key in the ``__globals__`` of the function under ``dispatch`` of the object under w0's weight's ``fake_mode`` key (in the trace the capture's own guard, whose globals are ``storage_writes``'s module dict: ``check_guard`` records code, defaults, names, doc and closure, not ``__globals__``, and the other-module entries skip ``__x__`` keys; in the real run the user's function, whose globals are this file's). From the second step on the parallel run doubles its gradients. Must not be EQUIVALENT."""
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


def _user_dispatch(*a, **k):
    return None


def parallelize(model, mesh):
    from torch.distributed._composable.replicate import replicate
    H["on"] = True
    replicate(model, device_mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    import types
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    if "on" in H:
        fm = vars(model.w0.weight).setdefault(
            "fake_mode", types.SimpleNamespace(dispatch=_user_dispatch))
        f = getattr(fm.dispatch, "__func__", fm.dispatch)
        g = f.__globals__
        n = g.get("__r55e__", 0)
        if n:
            _double(model)
        g["__r55e__"] = n + 1    # the guard's module globals, under a dunder key
    optimizer.step()
    optimizer.zero_grad()
    return loss
