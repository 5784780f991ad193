"""Round 31c, R31c-2 (false refusal): ``r30b_11`` with a second square layer ``sq2`` in a
second residual, both ColwiseParallel with the output gathered, tp 2. Right, but exit 3:
"traced data: nodes: node 152 (EINSUM) is ill-typed: repeated dim in ['h', 'h']" (not
diagnosed; probably the residual's key has a twin in each square weight, so
``Dims.twin_for`` finds two and ``_dedupe``'s block-and-whole branch leaves the name twice). Expected EQUIVALENT."""

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.tensor import Replicate
from torch.distributed.tensor.parallel import ColwiseParallel, parallelize_module

MESH = {"tp": 2}
SIZES = {"batch": 8, "d": 8, "h": 16, "vocab": 12}


class MLP(nn.Module):
    def __init__(self, d, h, v):
        super().__init__()
        self.l0 = nn.Linear(d, h)
        self.sq = nn.Linear(h, h)
        self.sq2 = nn.Linear(h, h)
        self.l1 = nn.Linear(h, v)

    def forward(self, x):
        h = torch.tanh(self.l0(x))
        h = h + self.sq(h)
        h = h + self.sq2(torch.tanh(h))
        return self.l1(torch.tanh(h))


def build_model(s):
    return MLP(s["d"], s["h"], s["vocab"])


def make_batch(s):
    return {"x": torch.zeros(s["batch"], s["d"]), "y": torch.zeros(s["batch"], dtype=torch.long)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.5)


def parallelize(model, mesh):
    parallelize_module(model, mesh["tp"], {"sq": ColwiseParallel(output_layouts=Replicate()),
                                               "sq2": ColwiseParallel(output_layouts=Replicate())})
    return model


def train_step(model, optimizer, batch, mesh):
    loss = F.cross_entropy(model(batch["x"]), batch["y"])
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
