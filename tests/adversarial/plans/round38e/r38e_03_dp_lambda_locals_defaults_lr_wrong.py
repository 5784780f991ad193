"""Round 38e (dp 2, wrong): the rewrite itself changes what a lambda computes. `caught`
compiles `lambda scale=2.0: locals()` as `lambda scale=2.0: <guard>(lambda: locals(), line)`:
the inner lambda has no arguments and does not name `scale`, so its `locals()` is `{}`.
A config made from a lambda's keyword defaults (`dict(locals())`) reads `scale = 2.0` in the
real run and the default `1.0` in the capture; no exception anywhere, nothing recorded.
Real run `lr = 0.2`, capture `lr = 0.1`.
Truth (torch4_truth.py FILE 1): w1 0.0070, w2 0.0093 (wrong: lr 0.2 in the real run).
Verdict (main 195d560): **EQUIVALENT** (4 goals, 19 s): false accept R38e-2.
"""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn
import contextlib

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

_HPARAMS = lambda scale=2.0, clip=None: dict(locals())   # noqa: E731  (a config from defaults)


def _n(g):
    return _HPARAMS().get("scale", 1.0)


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
