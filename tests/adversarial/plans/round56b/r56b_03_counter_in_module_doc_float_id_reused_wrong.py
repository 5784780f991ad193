"""Adversarial round 56b: the step counter is ``colorsys.__doc__``, a float; set to 0.0 when the train file is imported; the step frees the old float before making the new one, which CPython's float free list puts at the same address, so ``process_state.dunder_text`` (anything but str / int / bool / None by identity) sees no change. No tracer object is reached. From the second step on the parallel run doubles its gradients. Must not be EQUIVALENT."""
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

import colorsys as _colorsys  # noqa: E402
_colorsys.__doc__ = 0.0


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
        d = colorsys.__doc__
        n = int(d) if type(d) is float else 0
        if n:
            _double(model)
        colorsys.__doc__ = None     # the old float back on the free list
        del d
        colorsys.__doc__ = float(n + 1)
    optimizer.step()
    optimizer.zero_grad()
    return loss
