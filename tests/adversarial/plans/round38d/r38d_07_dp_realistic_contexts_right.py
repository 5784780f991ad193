"""Round 38d (dp 2, right): realistic context managers and lookups in the step, nothing fake-only
raised: `contextlib.nullcontext()`, `torch.autocast("cpu", enabled=False)`, `torch.no_grad()`
with a KeyError caught inside it, `warnings.catch_warnings()` around `warnings.warn`,
`getattr(model, "module", model)` (Module.__getattr__'s AttributeError swallowed by getattr),
`hasattr(optimizer, "zero_grad")`. The plan is right.
Truth (torch4_truth.py FILE 1): w1 6e-17, w2 0 (right).
Verdict (wip/r38 ba967a7): EQUIVALENT (4 goals, 40 s): right.
"""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn
import contextlib
import warnings

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
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    return model

_CACHE = {}


def _n(g):
    with contextlib.nullcontext(), torch.autocast("cpu", enabled=False):
        with torch.no_grad():
            try:
                s = _CACHE["scale"]
            except KeyError:
                s = 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        warnings.warn("a deprecation, ignored")
    return s


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
        optimizer.param_groups[0]["lr"] = 0.1 * _n(model.w1.weight.grad)
    optimizer.step()
    optimizer.zero_grad()
    return loss
