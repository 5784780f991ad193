"""Round 65c (r65c_03): right: examples/torch/mlp_ddp.py with a namedtuple, a frozen dataclass, an lru_cache-wrapped function called in the step (same argument every step), an exec-made function over torch.ops.aten.mul.Tensor, and a function of a second copy of fnmatch.py (fnmatchcase, only read) as train-file globals. Must stay EQUIVALENT."""


import collections
import dataclasses
import fnmatch
import functools
import importlib._bootstrap
import importlib.util
import sys

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


Cfg = collections.namedtuple("Cfg", "scale tag")
CFG = Cfg(1.0, "mlp")


@dataclasses.dataclass(frozen=True)
class Opts:
    lr: float = 0.1
    pattern: str = "*.py"


OPTS = Opts()


@functools.lru_cache(maxsize=None)
def _factor(n):
    return 1.0 / n


_G = {"torch": torch}
exec("def sq(t):\n    return torch.ops.aten.mul.Tensor(t, t)\n", _G)
SQ = _G["sq"]


def _copy():
    spec = importlib.util.spec_from_file_location("r65c_fnmatch_right", fnmatch.__file__)
    m = importlib._bootstrap._load(spec)
    sys.modules.pop("r65c_fnmatch_right", None)
    return m.fnmatchcase     # no cache in its path


FNC = _copy()


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
    return torch.optim.SGD(model.parameters(), lr=OPTS.lr)


def parallelize(model, mesh):
    return model


def train_step(model, optimizer, batch, mesh):
    assert FNC("train.py", OPTS.pattern) and CFG.tag == "mlp"
    loss = SQ(model(batch["x"]) * CFG.scale - batch["y"]).mean()
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.mul_(_factor(mesh["dp"].size()))
    optimizer.step()
    optimizer.zero_grad()
    return loss
