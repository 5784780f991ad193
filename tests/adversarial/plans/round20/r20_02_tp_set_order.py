"""R20: tensor-parallel peers all-reduce their gradients in the iteration order of a set of
parameter names (hash-seed dependent). Mesh dp=2 x tp=2; the model is replicated on every rank,
the batch is sharded over dp (so the tp peers of one dp slice hold equal gradients): each rank
all-reduces its gradients over tp and divides by |tp| (the identity when the peers' orders
agree), then over dp and divides by |dp| (the DDP average).

Truth: in a real run each rank is its own interpreter with its own string-hash seed, so the two
tp peers walk ``{"w1", "w2"}`` in different orders half of the time; their all_reduce then sums
one rank's w1.grad with the other's w2.grad (same shapes): wrong gradients, NOT EQUIVALENT.
Before round 20 every traced rank had its own hash seed; with the fork server the tp peers
(0,0) / (0,1) are jobs 3 and 5 of one server, and (1,0) / (1,1) jobs 4 and 6 of the other:
tp peers always agree in the verifier.
"""

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2, "tp": 2}
SIZES = {"batch": 8, "hidden": 6}


class MLP(nn.Module):
    def __init__(self, h):
        super().__init__()
        self.w1 = nn.Linear(h, h, bias=False)
        self.w2 = nn.Linear(h, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)))


def build_model(s):
    return MLP(s["hidden"])


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
        params = dict(model.named_parameters())
        for name in {"w1.weight", "w2.weight"}:       # a set: the order is the hash seed's
            g = params[name].grad
            dist.all_reduce(g, group=mesh["tp"].get_group())
            g.div_(mesh["tp"].size())
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
