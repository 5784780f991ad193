"""Stop 44 (dp 2, right): parallelize re-wraps a weight as a new ``nn.Parameter`` over the same
memory (``nn.Parameter(a.weight.detach())``) and sets ``requires_grad`` again: the values at
every name are the ones build_model made, so the parallelize guard (R39c-1) accepts it.
Truth (torch4_truth.py FILE 2): 2.8e-17 / 0 both steps (right). Verdict (stop 44): EQUIVALENT (4 goals, 62 s).
"""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn

SIZES = {"batch": 8, "hidden": 6}


class MLP(nn.Module):
    def __init__(self, h):
        super().__init__()
        self.a = nn.Linear(h, h, bias=False)
        self.b = nn.Linear(h, h, bias=False)

    def forward(self, x):
        return self.b(nn.functional.silu(self.a(x)))


def build_model(s):
    return MLP(s["hidden"])


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
    optimizer.step()
    optimizer.zero_grad()
    return loss


def parallelize(model, mesh):
    model.a.weight = nn.Parameter(model.a.weight.detach())     # same memory, a new object
    model.b.requires_grad_(True)
    return model
