"""Round 65d (r65d_08, right; diagnosis of r65d_07: the same with no lazy import in the step): examples/torch/mlp_ddp.py whose train_step imports matplotlib.pyplot (Agg), PIL.Image, rich.console and tqdm lazily (first step only; matplotlib's and PIL's imports register a bound method / builtin as exit callbacks: R64d-2's exemption), reads os.environ, logs a namedtuple at DEBUG built by an exec-made helper (globals of its own, numpy) and a frozen dataclass. Should be EQUIVALENT."""

import torch
import torch.distributed as dist
from torch import nn

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


import collections  # noqa: E402
import dataclasses  # noqa: E402
import logging  # noqa: E402
import os  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402

LOG = logging.getLogger("r65d_07")
Stat = collections.namedtuple("Stat", "name value")


@dataclasses.dataclass(frozen=True)
class Cfg:
    scale: float = 1.0


CFG = Cfg()
def _helper():
    ns = {"np": np}       # (not kept as a global: only the function is)
    exec("def summarize(name):\n    return str(np.dtype('float32')) + ':' + name\n", ns)
    return ns["summarize"]


SUMMARIZE = _helper()


def train_step(model, optimizer, batch, mesh):
    # lazy imports, first step only (plotting, progress bars, images, pretty printing)
    if os.environ.get("R65D_VERBOSE"):
        warnings.warn("verbose", stacklevel=1)
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    LOG.debug("%s", Stat(SUMMARIZE("loss"), CFG.scale))
    return loss
