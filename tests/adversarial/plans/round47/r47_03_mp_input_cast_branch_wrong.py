"""Round 47, R47-1: a block scales its input when it arrives in bf16; FSDP2 casts the block's
forward inputs to param_dtype (cast_forward_inputs, the default): wrong for real."""
MESH = {"dp": 2}
import torch
from torch import nn
from torch.distributed.fsdp import MixedPrecisionPolicy

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class Block(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.up = nn.Linear(h, f)

    def forward(self, x):
        if x.dtype == torch.bfloat16:
            x = x * 2
        return nn.functional.silu(self.up(x))


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.block = Block(h, f)
        self.down = nn.Linear(f, h)

    def forward(self, x):
        return self.down(self.block(x))


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16)
    fully_shard(model.block, mesh=mesh["dp"], mp_policy=mp)
    fully_shard(model, mesh=mesh["dp"], mp_policy=mp)
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x).float() - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
