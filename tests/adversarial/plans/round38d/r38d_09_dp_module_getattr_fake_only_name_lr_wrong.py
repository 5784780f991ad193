"""Round 38d (dp 2, wrong): R38c-5's allowance (an AttributeError whose last frame is
`nn.Module.__getattr__`) raised for a fake-only reason: `getattr(model, "scale_" +
type(g).__name__.lower())` finds the buffer `scale_tensor` in the real run and misses
`scale_faketensor` in the capture; the train file's `except AttributeError` takes 1.0.
Real run 2.0, capture 1.0.
Truth (torch4_truth.py FILE 1): w1 0.0070, w2 0.0093 (wrong: lr 0.2 in the real run).
Verdict (wip/r38 ba967a7): exit 3 (27 s): "catches AttributeError ('_Scales' object has no
attribute 'scale_faketensor')": sound, but only because R38c-5's allowance does not work inside
the capture (R38d-4); once it does, this plan is a false accept.
"""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn

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

class _Scales(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("scale_tensor", torch.tensor(2.0), persistent=False)


_S = _Scales()


def _n(g):
    try:
        getattr(_S, "scale_" + type(g).__name__.lower())
        return 2.0
    except AttributeError:    # WRONG: allowed (Module.__getattr__), raised in the capture only
        return 1.0


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
