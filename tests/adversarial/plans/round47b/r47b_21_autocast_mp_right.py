"""47b control: torch.autocast(cpu, bf16) around the forward with mp bf16: right."""
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
    mp = MixedPrecisionPolicy(param_dtype=BF)
    fully_shard(model.up, mesh=mesh["dp"], mp_policy=mp)
    fully_shard(model, mesh=mesh["dp"], mp_policy=mp)
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    with torch.autocast("cpu", dtype=BF):
        out = model(x)
    loss = ((out.to(y.dtype) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
