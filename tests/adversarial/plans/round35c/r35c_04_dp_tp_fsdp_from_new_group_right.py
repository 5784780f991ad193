"""Round 35c (dp 2 x tp 2, right): r35c_03's control: FSDP2 over
``DeviceMesh.from_group(dp_group, "cpu", mesh_dim_names=("fsdp",))`` of a ``dist.new_group``
dp group (Megatron's loop), no backend swap.
Truth (tp_truth): w1 0.0, w2 2.8e-17. Prove at 761d5b3: **UNKNOWN** (exit 2, 117 s on a loaded
machine; internal error "DimsError: input w1.weight: local dim 0 has size 22, its placement
('R', 'R') gives 44 (uneven sharding is not supported)", "this is a bug in shardproof"):
finding R35c-4, a false refusal."""

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import fully_shard

MESH = {"dp": 2, "tp": 2}
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


_G = {}


def parallelize(model, mesh):
    rank, ndp, ntp = dist.get_rank(), MESH["dp"], MESH["tp"]
    groups = [dist.new_group([i * ntp + j for i in range(ndp)]) for j in range(ntp)]
    _G["dp"] = groups[rank % ntp]
    dp = DeviceMesh.from_group(_G["dp"], "cpu", mesh_dim_names=("fsdp",))
    fully_shard(model.w1, mesh=dp)
    fully_shard(model.w2, mesh=dp)
    fully_shard(model, mesh=dp)
    return model


def train_step(model, optimizer, batch, mesh):
    pred = model(batch["x"])
    loss = ((pred - batch["y"]) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
