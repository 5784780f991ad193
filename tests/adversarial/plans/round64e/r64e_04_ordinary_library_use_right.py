"""Round 64e (r64e_04, right): examples/torch/mlp_ddp.py plus ordinary library use: `logging`, `warnings`, numpy and `os.environ` read at the top and in the step (a logger at WARNING so nothing prints; a warning filtered to "ignore"; numpy used on plain numbers (not on the loss: the capture refuses reading a fake tensor, exit 3 at first)), and `json` / `textwrap` / `multiprocessing.util` imported lazily in the step (first in the step: textwrap only if not loaded). Must be EQUIVALENT."""


import logging
import os
import warnings

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}
LOG = logging.getLogger("r64e_04")
LOG.setLevel(logging.WARNING)
warnings.filterwarnings("ignore", message="r64e_04")
VERBOSE = os.environ.get("R64E_VERBOSE", "0") == "1"


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
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    import json  # noqa: PLC0415 -- lazily, in the step
    import textwrap  # noqa: PLC0415
    import multiprocessing.util  # noqa: PLC0415
    LOG.info("batch %s", json.dumps(float(np.mean(np.arange(SIZES["batch"])))))
    warnings.warn("r64e_04: ignored", UserWarning)
    if VERBOSE or os.environ.get("R64E_VERBOSE") == "1":
        print(textwrap.shorten(str(multiprocessing.util.get_logger()), 40))
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
