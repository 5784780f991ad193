"""Adversarial round 53c: a plain tensor made in the step carries the user attribute `_is_param = True` (the mark a fake parameter has) and a gradient. For real `copy.deepcopy` of it is `Tensor.__deepcopy__` (gradient kept); the capture's `fake_deepcopy` takes it as a parameter and drops the gradient. The parallel run doubles its gradients when the copy has a gradient (for real: always). Must not be EQUIVALENT."""
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



def parallelize(model, mesh):
    from torch.distributed._composable.replicate import replicate
    replicate(model, device_mesh=mesh["dp"])
    return model

def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    t = torch.zeros(1, requires_grad=True)
    t.grad = torch.ones(1)
    t._is_param = True
    c = copy.deepcopy(t)
    if c.grad is not None and mesh is not None:
        _double(model)
    optimizer.step()
    optimizer.zero_grad()
    return loss
