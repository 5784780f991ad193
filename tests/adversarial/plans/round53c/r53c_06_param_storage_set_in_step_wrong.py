"""Adversarial round 53c: parallelize keeps the untyped storage object of model.w0.weight (no tensor: nothing for the alias check to count); after the update the step makes a new tensor on that storage with `set_` and halves it: for real w0 is halved, in the capture a fresh fake tensor is written. Must not be EQUIVALENT."""
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


EMA = {}


H = {}


def parallelize(model, mesh):
    from torch.distributed._composable.replicate import replicate
    w = model.w0.weight
    H["w"] = (w.untyped_storage(), w.dtype, w.device, w.numel())
    replicate(model, device_mesh=mesh["dp"])
    return model

def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    if "w" in H:
        with torch.no_grad():
            s, dt, dev, n = H["w"]
            torch.empty(0, dtype=dt, device=dev).set_(s, 0, (n,), (1,)).mul_(0.5)
    return loss
