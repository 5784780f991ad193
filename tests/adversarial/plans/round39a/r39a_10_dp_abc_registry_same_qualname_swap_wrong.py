"""Round 39a (dp 2, wrong from step 2): state stored in an ABC's registry, which `step_state`
now reads as the *qualified names* of the registered classes (`_abc_registry`, e505167). The
model class is an ABC (`metaclass=abc.ABCMeta`); `build_model` registers a marker class `Half`
and `forward` halves its output when `isinstance(self.marker, MLP)`. At the end of the parallel
step only, the registry is cleared and another class of the same module and qualname `Half`
registered (kept alive from a module the step adds to `sys.modules`, which the state read
skips as lazily imported): the registry reads the same before and after, spec and plan alike,
but the real second step no longer halves on the ranks.
Truth (torch4_truth.py FILE 2): step 1 0 / 3.5e-18; step 2 a.weight 0.0033, b.weight 0.0024.
Verdict (main 6e50b4f): UNKNOWN (70 s; 17 s again) "cannot read module <model> class MLP
(!<holds opaque _abc._abc_data>)" (R39a-6: the class reached through `__init__`'s `super()`
cell): sound, but only by R39a-6; a fix of R39a-6 that reads the registry by qualified names
would make this EQUIVALENT (compare the registered classes by identity, or their full
encoding, not by name).
"""
MESH = {"dp": 2}
import abc
import sys
import types

import torch
import torch.distributed as dist
from torch import nn

SIZES = {"batch": 8, "hidden": 6}


class Half:
    pass


class MLP(nn.Module, metaclass=abc.ABCMeta):
    def __init__(self, h):
        super().__init__()
        self.a = nn.Linear(h, h, bias=False)
        self.b = nn.Linear(h, h, bias=False)
        self.marker = Half()

    def forward(self, x):
        y = self.b(nn.functional.silu(self.a(x)))
        return y * 0.5 if isinstance(self.marker, MLP) else y


def build_model(s):
    MLP.register(Half)
    return MLP(s["hidden"])


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
        MLP._abc_registry_clear()
        MLP._abc_caches_clear()
        other = type("Half", (), {"__module__": Half.__module__})
        keep = sys.modules.setdefault("r39a_keep", types.ModuleType("r39a_keep"))
        keep.other = MLP.register(other)
    optimizer.step()
    optimizer.zero_grad()
    return loss
