"""Round 39c (dp 2, wrong): control for check_names_kept: parallelize reverses a ModuleList
(`layers = ModuleList(reversed(layers))`): the block objects move to each other's names.
Truth (torch4_truth.py FILE 1): layers.0.weight 0.63, layers.1.weight 0.63 (wrong).
Verdict (main 0a0faea): exit 3 (21 s) "parallelize moved ...": sound.
"""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn

SIZES = {"batch": 8, "hidden": 6}


class MLP(nn.Module):
    def __init__(self, h):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(h, h, bias=False) for _ in range(2)])

    def forward(self, x):
        return self.layers[1](nn.functional.silu(self.layers[0](x)))


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
    model.layers = nn.ModuleList(reversed(list(model.layers)))
    return model
