"""Idea (round 46e): FSDP-based replicate (replicate_with_fsdp) on w2 and the root; a hook on w2.weight
sets the root's divide factor to 1 before the root's post-backward (final callback): w0, w1 the sum; halved: right."""
MESH = {"dp": 2}
import copy
import torch
from torch import nn
from torch.distributed.tensor import DTensor

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
    from torch.distributed._composable.replicate_with_fsdp import replicate
    replicate(model.w2, mesh=mesh["dp"])
    replicate(model, mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    sharded = hasattr(model, "set_gradient_divide_factor")

    def hook(p):
        if sharded:
            model.set_gradient_divide_factor(1.0)

    h = model.w2.weight.register_post_accumulate_grad_hook(hook)
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    h.remove()
    model.w2.weight._post_accumulate_grad_hooks = None
    if sharded:
        with torch.no_grad():
            model.w0.weight.grad.mul_(0.5)
            model.w1.weight.grad.mul_(0.5)
        model.set_gradient_divide_factor(2.0)
    optimizer.step()
    optimizer.zero_grad()
    return loss
