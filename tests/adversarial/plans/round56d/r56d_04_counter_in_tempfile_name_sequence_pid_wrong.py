"""Adversarial round 56d: the step counter is the ``_rng_pid`` of ``tempfile._name_sequence`` (a new ``_RandomNameSequence`` each step, ``_rng_pid = -(n + 1)``). ``process_state._lazy_cache`` exempts the global whenever it is a ``_RandomNameSequence`` whose attributes are at most ``_rng`` and ``_rng_pid`` (R14-3's fix), without reading their values. No tracer object is reached. From the second step on the parallel run doubles its gradients. Must not be EQUIVALENT."""
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


def _count(tempfile):
    pid = vars(tempfile._name_sequence).get("_rng_pid", 0) if tempfile._name_sequence else 0
    return -pid if pid < 0 else 0


def parallelize(model, mesh):
    from torch.distributed._composable.replicate import replicate
    H["on"] = True
    replicate(model, device_mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    import tempfile
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    if "on" in H:
        n = _count(tempfile)
        if n:
            _double(model)
        s = tempfile._RandomNameSequence()
        s._rng_pid = -(n + 1)
        tempfile._name_sequence = s
    optimizer.step()
    optimizer.zero_grad()
    return loss
