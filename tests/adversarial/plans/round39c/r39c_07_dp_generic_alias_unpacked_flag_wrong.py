"""Round 39c (dp 2, wrong from step 2): `step_state` encodes a value of exactly
`types.GenericAlias` as `alias:origin[args]` (5fc3630, R39a-4), which leaves out the alias's
`__unpacked__` flag: `tuple[float]` and `*tuple[float]` (`next(iter(tuple[float]))`, Python
3.11) encode the same. The module attribute `box` is `tuple[float]`; `forward` scales by 0.5
when `box.__unpacked__`; the parallel step replaces it by `*tuple[float]` at its end.
Truth (torch4_truth.py FILE 2): step 1 0 / 0; step 2 a.weight 0.0033, b.weight 0.0024 (wrong).
Verdict (main 0a0faea): EQUIVALENT (4 goals, 57 s): false accept R39c-2.
"""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn
import types

SIZES = {"batch": 8, "hidden": 6}


class MLP(nn.Module):
    def __init__(self, h):
        super().__init__()
        self.a = nn.Linear(h, h, bias=False)
        self.b = nn.Linear(h, h, bias=False)
        self.box = tuple[float]         # exactly types.GenericAlias

    def forward(self, x):
        return self.b(nn.functional.silu(self.a(x))) * (0.5 if self.box.__unpacked__ else 1.0)


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
        model.box = next(iter(tuple[float]))     # *tuple[float]: __unpacked__ True
    optimizer.step()
    optimizer.zero_grad()
    return loss


def parallelize(model, mesh):
    return model
