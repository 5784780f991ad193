"""Idea (round 46e): group [w1, w2], two backwards of loss/2; a hook on w1.weight sets the group factor to
1 in the first backward (w2 already read: 2). Second backward sums: w1, w2 = G/2 + G = 1.5 G; divided by 1.5: right."""
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
    from torch.distributed.fsdp import fully_shard
    fully_shard([model.w1, model.w2], mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    sharded = hasattr(model.w1, "set_gradient_divide_factor")

    def hook(p):
        if sharded:
            model.w1.set_gradient_divide_factor(1.0)

    h = model.w1.weight.register_post_accumulate_grad_hook(hook)
    loss = ((model(x) - y) ** 2).mean()
    (loss / 2).backward()
    h.remove()
    model.w1.weight._post_accumulate_grad_hooks = None
    loss2 = ((model(x) - y) ** 2).mean()
    (loss2 / 2).backward()
    if sharded:
        with torch.no_grad():
            model.w1.weight.grad.div_(1.5)
            model.w2.weight.grad.div_(1.5)
        model.w2.set_gradient_divide_factor(2.0)
    optimizer.step()
    optimizer.zero_grad()
    return loss
