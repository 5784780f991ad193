"""Round 8 adversarial train file: every step (single-device and parallel alike) leaves
`model.post = lambda t: t * (1.0 if rank 0 else 0.5)`, the rank read by `dist.get_rank()` when the
lambda runs; the forward applies `model.post` when present. Both sides leave the same function
(same code, no defaults, no closure: the same fingerprint), so the "same change on both sides"
rule accepts it, but on rank 1 it halves the hidden activations from step 2 on.
Wrong from step 2 on."""

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


def _identity(t):
    return t


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(getattr(self, "post", _identity)(nn.functional.silu(self.w1(x))))


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def make_batch(s):
    return {"x": torch.zeros(s["batch"], s["hidden"]), "y": torch.zeros(s["batch"], s["hidden"])}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    model.post = lambda t: t * (1.0 if not dist.is_initialized() or dist.get_rank() == 0 else 0.5)
    return loss
