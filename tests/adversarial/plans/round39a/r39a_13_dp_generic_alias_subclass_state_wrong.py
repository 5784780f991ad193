"""Round 39a (dp 2, wrong from step 2): `step_state` encodes any `isinstance(v,
types.GenericAlias)` as its origin and arguments only (e505167, for torch's `dict[str, Any]`
annotations), so state kept on an instance of a *subclass* of `types.GenericAlias` (with
ordinary attribute access) is never read: the module's `box.scale` scales the output; the
parallel step sets it to 0.5 at its end, the single-device step does not.
Truth (torch4_truth.py FILE 2): step 1 0 / 0; step 2 a.weight 0.0033, b.weight 0.0024 (wrong).
Verdict (main 6e50b4f): EQUIVALENT (4 goals, 44 s): false accept R39a-4 (before e505167 the
encoder's `__dict__` case would have read the box: by reading the code, not run).
"""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn
import types


class Box(types.GenericAlias):     # a GenericAlias whose instances keep their own attributes
    __getattribute__ = object.__getattribute__

SIZES = {"batch": 8, "hidden": 6}


class MLP(nn.Module):
    def __init__(self, h):
        super().__init__()
        self.a = nn.Linear(h, h, bias=False)
        self.b = nn.Linear(h, h, bias=False)
        self.box = Box(dict, (str, float))
        self.box.scale = 1.0

    def forward(self, x):
        return self.b(nn.functional.silu(self.a(x))) * self.box.scale


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
        model.box.scale = 0.5
    optimizer.step()
    optimizer.zero_grad()
    return loss


def parallelize(model, mesh):
    return model
