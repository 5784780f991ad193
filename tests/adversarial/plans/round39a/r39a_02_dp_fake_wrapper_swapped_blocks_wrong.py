"""Round 39a (dp 2, wrong): a user module whose child attribute is literally named
`_checkpoint_wrapped_module` (not torch's wrapper) wrapping the *other* block: `parallelize`
sets `model.a = Wrap(model.b)`, `model.b = Wrap(model.a)`. `wrapper_names` removes the segment
from every name, torch's wrapper or not (one to one, so not refused).
Truth: the same program as r39a_01 (a.weight 0.63, b.weight 0.63, wrong); torch4_truth.py
itself stops with KeyError 'a.weight' (the user's Wrap has no state_dict hook, so the real
state_dict keeps `a._checkpoint_wrapped_module.weight`).
Verdict (main 6e50b4f): EQUIVALENT (4 goals, 63 s): false accept R39a-1 (the swap), through a
name torch's wrapper does not make.
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


class Wrap(nn.Module):
    def __init__(self, m):
        super().__init__()
        self._checkpoint_wrapped_module = m

    def forward(self, x):
        return self._checkpoint_wrapped_module(x)


def parallelize(model, mesh):
    a, b = model.a, model.b
    model.a, model.b = Wrap(b), Wrap(a)
    return model
