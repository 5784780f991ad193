"""Round 62a (r62a_06, right): examples/torch/mlp_ddp.py with the import-time settings of a common training script (logging.basicConfig, a module logger, warnings.filterwarnings, numpy print options, os.environ.setdefault, torch.set_float32_matmul_precision) and a log.debug call in the step. Must stay EQUIVALENT (a false refusal otherwise)."""
"""A hand-written DDP (the smallest ``prove --torch`` example): each rank computes the loss on
its shard of the batch, all-reduces the gradients with ``torch.distributed.all_reduce`` and
divides by the data-parallel world size, then SGD steps. Proves EQUIVALENT.

    prove --torch examples/torch/mlp_ddp.py

Its buggy twin ``mlp_ddp_sum_buggy.py`` leaves out the division.
"""

import logging
import os
import warnings

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}

# common import-time settings of a real training script (all left as they are by the step)
logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger(__name__)
warnings.filterwarnings("ignore", category=UserWarning)
np.set_printoptions(precision=4, suppress=True)
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
torch.set_float32_matmul_precision("high")
DEBUG = os.environ.get("R62A_DEBUG", "") == "1"
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
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    log.debug("loss computed")       # below the level: nothing emitted
    if DEBUG:
        log.warning("debug on")
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
