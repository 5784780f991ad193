"""Round 35c (dp 2 x tp 2): hand-written DDP over ``dist.new_group`` dp groups made by every
rank in the same order, but ``distributed_c10d._world.group_count`` (a counter, not a function)
is put back before each call, so both dp groups (ranks [0, 2] and [1, 3]) get the same name,
hence the same store prefix for their rendezvous. Every rank records the same calls
``(ranks, name)``, one name per set of ranks.
Truth (tp_truth): the real run fails ("Gloo connectFullMesh failed ... Connection refused").
Prove at 761d5b3: exit 3 (19 s) "...:45: ValueError: The specified group name has already been
created" (torch's own check, in the fake world too): sound."""

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2, "tp": 2}
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
    from torch.distributed import distributed_c10d as c10d
    rank, dp, tp = dist.get_rank(), MESH["dp"], MESH["tp"]
    count = c10d._world.group_count
    groups = []
    for j in range(tp):    # both dp groups get the same name (the same store prefix)
        c10d._world.group_count = count
        groups.append(dist.new_group([i * tp + j for i in range(dp)]))
    _G["dp"] = groups[rank % tp]
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        g = _G["dp"]
        for p in model.parameters():
            dist.all_reduce(p.grad, group=g)
            p.grad.div_(dist.get_world_size(group=g))
    optimizer.step()
    optimizer.zero_grad()
    return loss
