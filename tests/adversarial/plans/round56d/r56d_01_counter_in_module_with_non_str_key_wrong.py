"""Adversarial round 56d: the step counter is a plain int global of ``colorsys`` (``colorsys.r56d``, rebound each step), read by value like any other module global (R10-1), but the train file puts one non-string key in ``colorsys``'s namespace when it is imported (``vars(colorsys)[0] = 0``): ``process_state._process_state`` sorts the module's items by key, the sort raises ``TypeError`` (int < str), and the ``except TypeError: continue`` meant for "a module whose namespace is not a dict" drops the whole module from both fingerprints. No tracer object is reached. From the second step on the parallel run doubles its gradients. Must not be EQUIVALENT."""
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
    import colorsys
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    if "on" in H:
        n = colorsys.r56d
        if n:
            _double(model)
        colorsys.r56d = n + 1
    optimizer.step()
    optimizer.zero_grad()
    return loss


import colorsys as _colorsys  # noqa: E402
vars(_colorsys)[0] = 0     # one non-string key: the module's items no longer sort
_colorsys.r56d = 0
