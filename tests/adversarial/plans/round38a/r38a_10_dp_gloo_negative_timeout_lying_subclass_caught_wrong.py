"""Round 38a (dp 2, wrong): r36d_07 (a `new_group(backend="gloo", timeout=-1 s)` that raises in the
real run, caught: no gradient all-reduce) with the timeout a `timedelta` subclass whose `__ge__`
/ `__le__` say True: `why_it_may_raise`'s `timedelta(0) <= timeout <= _MAX_TIMEOUT` calls the
subclass's reflected `__ge__` first, then its `__le__`. gloo reads the value (pybind's
days / seconds / microseconds): -1 s.
Truth (torch4_truth.py FILE 1): w1 0.0088, w2 0.018 (wrong: the group raised, caught; no all-
reduce).
Verdict (main 4d89de3): **EQUIVALENT** (4 goals, 55 s): false accept R38a-4.
"""

import datetime

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}
_G = {}


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


class _Lying(datetime.timedelta):
    """A timedelta that compares as within [0, 100 years] (its value is -1 s)."""

    def __ge__(self, other):
        return True

    def __le__(self, other):
        return True


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    ranks = list(range(dist.get_world_size()))
    _G["dp"] = dist.new_group(ranks=ranks)
    # Megatron's parallel_state: a gloo duplicate of the dp group (for CPU-side collectives)
    try:
        _G["dp_gloo"] = dist.new_group(ranks=ranks, backend="gloo",
                                       timeout=_Lying(seconds=-1))
    except RuntimeError:   # "no gloo here: CPU-side collectives off"
        _G["dp_gloo"] = None
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        g = _G["dp_gloo"]
        for p in model.parameters():
            if g is not None:
                dist.all_reduce(p.grad, group=g)
                p.grad.div_(dist.get_world_size(group=g))
    optimizer.step()
    optimizer.zero_grad()
    return loss
