"""Round 39c (dp 2, wrong): parallelize registers a parametrization on a.weight
(`parametrize.register_parametrization(model.a, 'weight', Neg())`): the forward uses -W;
the parameter moves to a.parametrizations.weight.original.
Truth: wrong by construction (forward uses -W; torch4_truth.py cannot name
a.weight: KeyError). Verdict (main 0a0faea): exit 3 (15 s) "parallelize moved 'a.weight' ...
to 'a.parametrizations.weight.original'": sound.
"""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn

SIZES = {"batch": 8, "hidden": 6}


class MLP(nn.Module):
    def __init__(self, h):
        super().__init__()
        self.a = nn.Linear(h, h, bias=False)
        self.b = nn.Linear(h, h, bias=False)

    def forward(self, x):
        return self.b(nn.functional.silu(self.a(x)))


def build_model(s):
    return MLP(s["hidden"])


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
    optimizer.step()
    optimizer.zero_grad()
    return loss


def parallelize(model, mesh):
    import torch.nn.utils.parametrize as P

    class Neg(nn.Module):
        def forward(self, w):
            return -w
    P.register_parametrization(model.a, 'weight', Neg())
    return model
