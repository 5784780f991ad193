"""Round 31c, R31c-1 (false accept): a masked square layer, ``F.linear(h, W * (c | c.t()))``
with ``c`` a bool [h, h] batch input (replicated over dp) and ``W`` the weight of
``nn.Linear(h, h)`` in a residual; the parallel step writes ``c | c`` (a dropped ``.t()``:
torch masks with ``c``). ``aten.bitwise_or`` combines its operands by name
(``rules_index.BitwiseOr``: ``p.term``, ``q.term``, no ``Lowering.fit``): ``c.t()``'s term has
``c``'s names, so ``c | c.t()`` is lowered as ``c | c``. dp 2. Right answer: NOT EQUIVALENT (or
UNKNOWN); prove says EQUIVALENT (12 goals); the oracle: grad:sq.weight 0.066."""

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

MESH = {"dp": 2}
DATA_SHARDING = {"x": {"dp": 0}, "y": {"dp": 0}, "c": {}}
SIZES = {"batch": 8, "d": 8, "h": 16, "vocab": 12}


class MLP(nn.Module):
    def __init__(self, d, h, v):
        super().__init__()
        self.l0 = nn.Linear(d, h)
        self.sq = nn.Linear(h, h)
        self.l1 = nn.Linear(h, v)

    def forward(self, x, c, sym=True):
        h = torch.tanh(self.l0(x))
        c = c | c.t() if sym else c | c     # the plan: c | c (a dropped .t())
        return self.l1(h + F.linear(h, self.sq.weight * c, self.sq.bias))


def build_model(s):
    return MLP(s["d"], s["h"], s["vocab"])


def make_batch(s):
    return {"x": torch.zeros(s["batch"], s["d"]), "y": torch.zeros(s["batch"], dtype=torch.long),
            "c": torch.zeros(s["h"], s["h"], dtype=torch.bool)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.5)


def parallelize(model, mesh):
    return model


def train_step(model, optimizer, batch, mesh):
    loss = F.cross_entropy(model(batch["x"], batch["c"], sym=mesh is None), batch["y"])
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
