"""Idea (round 46c): R46b-1 on HSDP (dp_replicate 2 x dp_shard 2): root unit (w1, w2); a hook
on w1.weight doubles its gradient when model.w2.weight.grad is None (for real: w1 first in
foreach_reduce -> None -> doubled; one device: set). Wrong plan."""
MESH = {"dp_replicate": 2, "dp_shard": 2}
import torch
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)))


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    fully_shard(model, mesh=mesh["dp_replicate", "dp_shard"])
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]

    def hook(p):
        if model.w2.weight.grad is None:
            p.grad.mul_(2.0)

    h = model.w1.weight.register_post_accumulate_grad_hook(hook)
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    h.remove()
    model.w1.weight._post_accumulate_grad_hooks = None   # as before the step
    optimizer.step()
    optimizer.zero_grad()
    return loss
