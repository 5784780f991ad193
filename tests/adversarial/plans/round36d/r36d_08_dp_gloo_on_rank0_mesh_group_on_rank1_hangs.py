"""Round 36d (dp 2, hangs): every rank
makes the gloo duplicate of dp, but rank 0 all-reduces over it and rank 1 over the mesh's dp
group (the default group here): in the real run the two all-reduces are on groups of other
names and never pair (a hang until gloo's timeout). Each trace alone maps its group to dp.
check_traces' "one group per axis" check (new_group on one trace, the mesh's group on another)
is what must refuse it.

Truth: not run (it hangs, reasoned above).
Verdict at 072d231: exit 3 (109 s, loaded): "collectives run over both the mesh's 'dp' group
and a dist.new_group group of its ranks": sound.
"""

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}
_G = {}


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
    ranks = list(range(dist.get_world_size()))
    _G["dp"] = dist.new_group(ranks=ranks)
    # Megatron's parallel_state: a gloo duplicate of the dp group (for CPU-side collectives)
    _G["dp_gloo"] = dist.new_group(ranks=ranks, backend="gloo")
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        g = _G["dp_gloo"]
        if dist.get_rank() != 0:
            g = mesh.get_group("dp")
        for p in model.parameters():
            dist.all_reduce(p.grad, group=g)
            p.grad.div_(dist.get_world_size(group=g))
    optimizer.step()
    optimizer.zero_grad()
    return loss
