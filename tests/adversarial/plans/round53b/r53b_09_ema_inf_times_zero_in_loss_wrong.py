"""Adversarial round 53b: parallelize deep-copies the model on meta (an EMA) and scales the copy by inf (for real: inf or nan values); the step adds 0.0 * sum(copy * w0) to the loss. For real the loss and w0's gradient are nan; in the capture the copy is an Opaque constant: is 0 * Opaque simplified to 0? Must not be EQUIVALENT."""
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


EMA = {}


def parallelize(model, mesh):
    from torch.distributed._composable.replicate import replicate
    EMA["m"] = copy.deepcopy(model)
    with torch.no_grad():
        for e in EMA["m"].parameters():
            e.mul_(float("inf"))
    replicate(model, device_mesh=mesh["dp"])
    return model

def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    if "m" in EMA:
        loss = loss + 0.0 * (EMA["m"].w0.weight * model.w0.weight).sum()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
