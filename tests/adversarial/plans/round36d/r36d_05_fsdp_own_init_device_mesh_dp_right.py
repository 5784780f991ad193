"""Round 36d (dp 2, right): t4_19 with parallelize
ignoring the mesh it is given and making its own, init_device_mesh("cpu", (2,),
mesh_dim_names=("dp",)) (a common habit). torch reuses the default group for a 1-D mesh of the
whole world, which is the world's dp group here: the names and the groups are the world's.

Truth (torch4_truth.py FILE 1, gloo): w1 5.6e-17, w2 0.0 (right).
Verdict at 072d231: EQUIVALENT (63 s, loaded): sound.
"""

import torch
from torch import nn
from torch.distributed.fsdp import fully_shard
from torch.distributed.device_mesh import init_device_mesh
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
    dp = init_device_mesh("cpu", (dist.get_world_size(),), mesh_dim_names=("dp",))
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
