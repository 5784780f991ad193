"""Round 63d (r63d_03): right. examples/torch/mlp_ddp.py with signal handlers ef2465bb's deep_text now reads in full: a logging.Logger's bound method (a library's object), a functools.wraps-decorated function of the train file, an instance of a train-file dataclass with __call__, an instance of a namedtuple subclass made inside a function (its class no module's global: its namespace and namedtuple's exec'd __new__ read); torch.jit.set_fusion_strategy at import (f104656c reads it by swapping); in the step the logger, warnings.warn, numpy and os.environ used normally. Must stay EQUIVALENT."""
import torch
import torch.distributed as dist
from torch import nn


import collections
import dataclasses
import functools
import logging
import os
import signal
import warnings

import numpy as np

LOG = logging.getLogger("r63d")


def _orig(signum, frame):
    LOG.warning("signal %s", signum)


@functools.wraps(_orig)
def _wrapped(signum, frame):
    return _orig(signum, frame)


@dataclasses.dataclass
class Saver:
    path: str = "/tmp/r63d_ckpt"

    def __call__(self, signum, frame):
        LOG.warning("would save to %s", self.path)


def _install():
    NT = collections.namedtuple("NT", "a b")

    class Alarm(NT):
        def __call__(self, *a):
            pass
    signal.signal(signal.SIGUSR1, LOG.warning)
    signal.signal(signal.SIGUSR2, _wrapped)
    signal.signal(signal.SIGHUP, Saver())
    signal.signal(signal.SIGALRM, Alarm(1, 2))


_install()
torch.jit.set_fusion_strategy([("DYNAMIC", 3)])

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)))


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def make_batch(s):
    return {"x": torch.zeros(s["batch"], s["hidden"]), "y": torch.zeros(s["batch"], s["hidden"])}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    return model


def train_step(model, optimizer, batch, mesh):
    LOG.info("step")
    if os.environ.get("R63D_NEVER_SET"):
        warnings.warn("r63d", UserWarning)
    np.add(np.ones(3), 1)
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
