"""Idea: r41c_11 (a standard-library ABC nested in a class, registered in the step: UNKNOWN only
through abc's cache token, moved by one, unexplained) with the move paid for: `import_made`
counts the registry entries of an ABC first seen after the step and defined by a module imported
during it as explained moves. The train file makes an ABC `Fake` with `__module__ = "graphlib"`
at import, registers a dummy class with it then (the token moves before the step) and keeps it
in a list; the parallel step imports graphlib, puts `Fake` there, and registers the config class
with `CompatibilityFiles.SpecPath`: the token moved by one, one registration explained.
`forward` scales by 0.5 when the config is a `SpecPath`.
Truth (torch4_truth.py FILE 2): step 1 5.6e-17 / 0; step 2 w1 0.0027 / w2 0.0051 (wrong).
Verdict (970c0c9): EQUIVALENT (4 goals, 70 s): false accept R41c-7.
"""
MESH = {"dp": 2}
import importlib
import importlib.util
import numbers
import sys
import abc
import importlib.resources._adapters  # noqa: F401 (loaded in every process)

import torch
import torch.distributed as dist
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class Cfg:
    def __init__(self):
        self.width = 1


class _Dummy:
    pass


def _fake_abc():
    fake = abc.ABCMeta("Fake", (), {"__module__": "graphlib"})
    fake.register(_Dummy)        # at import: the token moves before any step
    return fake


_HIDDEN = [_fake_abc()]          # not a module global: registry_state does not see it


def _spec_path():
    return sys.modules["importlib.resources._adapters"].CompatibilityFiles.SpecPath


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)
        self.cfg = Cfg()

    def forward(self, x):
        y = self.w2(nn.functional.silu(self.w1(x)))
        return y * 0.5 if isinstance(self.cfg, _spec_path()) else y


def _carry():
    import graphlib
    graphlib.Fake = _HIDDEN[0]   # "an ABC first seen after the step, defined by a module
    #                              imported during it": its one registered class explains
    _spec_path().register(Cfg)   # this unseen registration's move of the token


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
        _carry()
    optimizer.step()
    optimizer.zero_grad()
    return loss

