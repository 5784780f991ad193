"""Round 36d (dp 2): FSDP2 over
DeviceMesh.from_group([dp group], "cpu", mesh=[1, 0], mesh_dim_names=("dp",)): the world's dp
group object under the world's axis name, but a mesh tensor in the other order (from_group
checks the mesh against the group's ranks only for a single group, not for a list). FSDP2
shards by the group's rank (shard_mesh_rank = group.rank()); the DTensors' mesh puts rank 0 at
coordinate 1.

Truth (torch4_truth.py FILE 1, gloo): w1 5.6e-17, w2 0.0 (right: FSDP2 takes the shard
index from the group, shard_mesh_rank = group.rank()).
Verdict at 072d231: EQUIVALENT (67 s, loaded): sound.
"""

import torch
from torch import nn
from torch.distributed.fsdp import fully_shard
from torch.distributed.device_mesh import DeviceMesh
import torch.distributed as dist

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
    g = mesh.get_group("dp")
    dp = DeviceMesh.from_group([g], "cpu", mesh=list(reversed(dist.get_process_group_ranks(g))),
                               mesh_dim_names=("dp",))
    fully_shard(model.w1, mesh=dp)
    fully_shard(model.w2, mesh=dp)
    fully_shard(model, mesh=dp)
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
