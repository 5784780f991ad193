"""Round 38c (dp 2, wrong): the raiser in a function decorated with a `contextlib.ContextDecorator`
whose `__exit__` returns True: the `with` is contextlib's (`ContextDecorator.inner`), not the
train file's, so no `with` body of the train file records it. Real run: `n = 2.0`; capture
`n = 1.0` (the default in the box).
Truth (torch4_truth.py FILE 1): w1 0.0070, w2 0.0093 (wrong: lr 0.2 in the real run).
Verdict (wip/r38 18debf8): **EQUIVALENT** (4 goals, 53 s): false accept.
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


class _quiet(contextlib.ContextDecorator):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return True      # WRONG: swallows whatever the decorated function raised


@_quiet()
def _fill(g, box):
    b = bytes(g.untyped_storage())
    box[0] = 2.0 if len(b) > 0 else 1.0


def _n(g):
    box = [1.0]
    _fill(g, box)
    return box[0]


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
