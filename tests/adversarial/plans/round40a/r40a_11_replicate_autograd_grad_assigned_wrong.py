"""Round 40a (dp 2): `replicate` (DDP) and the gradient taken by `torch.autograd.grad(loss,
params)` then assigned to `.grad` (functional-style code). The model's all-reducing views are
in the graph, so the returned gradients are all-reduced. DDP reduces in its hooks on the
parameters' gradient accumulation, which `autograd.grad` does not run: each rank keeps its own.
Truth (torch4_truth.py FILE 2): step 1 w1 0.0088, w2 0.018; step 2 w1 0.011, w2 0.023 (wrong).
Verdict (main 05940a8): EQUIVALENT (4 goals, 39 s): false accept R40a-5.
"""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class Base(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)))


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.inner = Base(h, f)

    def forward(self, x):
        return self.inner(x)


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    from torch.distributed._composable.replicate import replicate
    replicate(model, device_mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    out = model(batch["x"])
    loss = ((out - batch["y"]) ** 2).mean()
    params = list(model.parameters())
    for p, g in zip(params, torch.autograd.grad(loss, params)):
        p.grad = g
    optimizer.step()
    optimizer.zero_grad()
    return loss
