"""Round 26 (non-pipelined; found reading change 3's `copy_`): `aten._reshape_alias(x, size,
stride)` is lowered as `view(x, size)` (`rules_layout`: a relabelling, `lower.RELABEL_VIEWS`:
an alias seeing all of its base), its stride argument never read. With a stride that is not
the row-major one (here the column-major reading of a row-major (r, c) gradient: element
[i, j] is storage[i + j*r]) the view is a different tensor. The plan averages the gradient over
dp and then writes back `p.grad` read through such an alias: for real every 2-d gradient is
scrambled; in the lowering it is the identity."""

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
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
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            r, c = p.grad.shape
            g = torch.ops.aten._reshape_alias(p.grad, [r, c], [1, r])   # column-major reading
            p.grad.copy_(g / mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
