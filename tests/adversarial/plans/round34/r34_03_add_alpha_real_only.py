"""Round 34, attempt a3: a rule that reads a literal raw instead of through ``Traces.scalar``
(``rules_elementwise._alpha``: ``if n.kwargs.get("alpha", 1) == 1: return y``):
``torch.add(g, g, alpha=a) - g``, ``a`` 1 at the probe sizes (the gradient; make_fx drops the
default kwarg) and 2 at the real sizes (square gradients: twice the gradient). Truth
(torch4_truth, dp 2): step 1 w1 0.0126 / w2 0.0053, step 2 0.0101 / 0.0055. Prove at 26b88f4:
UNKNOWN (18 s), "size-literal: argument alpha of add ... is None at the probe sizes and 2 at the
real sizes": sound (the kwarg present at one size only is reported)."""

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 6}


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
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
            g = p.grad
            a = 2 if g.shape[0] == g.shape[1] else 1     # 2 at the real sizes only
            b = torch.add(g, g, alpha=a) - g
            p.grad.copy_(b.clone())
    optimizer.step()
    optimizer.zero_grad()
    return loss
