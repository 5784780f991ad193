"""Round 36d (dp 2): FSDP2 over
DeviceMesh.from_group([dp group], "cpu", mesh=[this rank], mesh_dim_names=("dp",)): the world's
dp group object under the world's axis name (so group_identity takes it), but a mesh of size
1 (from_group checks a list's mesh for its ndim only). FSDP2 takes its shard count from the
mesh (shard_mesh_size = mesh.size(0) = 1) and its collectives and shard index from the group.

Truth (torch4_truth.py FILE 1): the real run crashes (IndexError in FSDP2's chunks[shard_rank] on
rank 1, then gloo's "Connection closed by peer").
Verdict at 072d231: exit 3 (42 s): "capturing the training step failed: RuntimeError: a and
b must have same reduction dim": sound.
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
    dp = DeviceMesh.from_group([g], "cpu", mesh=[dist.get_rank()], mesh_dim_names=("dp",))
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
