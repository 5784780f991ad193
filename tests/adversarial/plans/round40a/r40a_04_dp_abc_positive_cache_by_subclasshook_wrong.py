"""Round 40a (dp 2, wrong from step 2): `step_state` reads an abstract class by its registry
(`_abc_registry`, R39a-6), not by its caches. `MLP.forward` doubles its output when
`isinstance(self.inner, Scalable)`; `Scalable.__subclasshook__` says yes while a global flag is
set. At the end of the parallel step only: `Scalable._abc_caches_clear()`, the flag set, one
`isinstance` (the positive cache now holds `Base`), the flag reset. The flag, the registry and
the class read as before the step and as in the single-device run; the positive cache still
says yes: from step 2 on the ranks' output is doubled.
Truth (torch4_truth.py FILE 2): step 1 w1 5.6e-17, w2 0; step 2 w1 0.011, w2 0.014 (wrong).
Verdict (main 05940a8): EQUIVALENT (4 goals, 35 s): false accept R40a-2.
"""
MESH = {"dp": 2}
import abc

import torch
import torch.distributed as dist
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


FLAG = [False]                     # read by Scalable's subclass hook


class Scalable(abc.ABC):
    @classmethod
    def __subclasshook__(cls, c):
        return True if FLAG[0] else NotImplemented


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
        y = self.inner(x)
        return y * 2 if isinstance(self.inner, Scalable) else y


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    return model


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
        Scalable._abc_caches_clear()       # (forward's negative answer)
        FLAG[0] = True
        isinstance(model.inner, Scalable)  # the positive cache now holds Base
        FLAG[0] = False
    optimizer.step()
    optimizer.zero_grad()
    return loss
