"""Round 31c: a square tied embedding (vocab == h, head ``F.linear(h, E)``) with a square
residual layer, right DDP, dp 2. EQUIVALENT expected (6 goals). Its mirrors (head ``E.t()``,
lookup in ``E.t()``, ``E``'s gradient transposed) are not square at the probe sizes: exit 3 at
capture (torch rejects the shapes)."""

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "d": 8, "h": 16, "vocab": 16}


class MLP(nn.Module):
    def __init__(self, d, h, v):
        super().__init__()
        self.emb = nn.Embedding(v, h)      # vocab == h: a square embedding
        self.sq = nn.Linear(h, h)

    def forward(self, x):
        h = torch.tanh(self.emb(x))
        h = h + self.sq(h)
        return F.linear(h, self.emb.weight)   # tied head: h @ E^T


def build_model(s):
    return MLP(s["d"], s["h"], s["vocab"])


def make_batch(s):
    return {"x": torch.zeros(s["batch"], dtype=torch.long), "y": torch.zeros(s["batch"], dtype=torch.long)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.5)


def parallelize(model, mesh):
    return model


def train_step(model, optimizer, batch, mesh):
    loss = F.cross_entropy(model(batch["x"]), batch["y"])
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
