"""47b control: fully_shard with an explicit default offload_policy=OffloadPolicy() and mp bf16: right."""
MESH = {"dp": 2}
import torch
from torch import nn
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}
BF = torch.bfloat16


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.up = nn.Linear(h, f)
        self.down = nn.Linear(f, h)

    def forward(self, x):
        return self.down(nn.functional.silu(self.up(x).to(self.down.weight.dtype)))


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)



def parallelize(model, mesh):
    from torch.distributed.fsdp import OffloadPolicy
    mp = MixedPrecisionPolicy(param_dtype=BF, reduce_dtype=torch.float32)
    fully_shard(model.up, mesh=mesh["dp"], mp_policy=mp, offload_policy=OffloadPolicy())
    fully_shard(model, mesh=mesh["dp"], mp_policy=mp, reshard_after_forward=True,
                offload_policy=OffloadPolicy(), ignored_params=None, dp_mesh_dims=None)
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x).float() - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
