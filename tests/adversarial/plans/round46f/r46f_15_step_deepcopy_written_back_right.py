"""Stop 53 (R46f-4 fix): the step deep-copies model.w0 before the update and copies the copy's blend back into the model after it, on every run (spec and plan alike): right (truth 0.0), and exact in the capture (the deep copy is a traced clone): EQUIVALENT."""
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


def parallelize(model, mesh):
    from torch.distributed._composable.replicate import replicate
    replicate(model, device_mesh=mesh["dp"])
    return model

def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    ema = copy.deepcopy(model.w0)
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    with torch.no_grad():
        ema.weight.mul_(0.9).add_(model.w0.weight, alpha=0.1)
        model.w0.weight.copy_(ema.weight)
    return loss
