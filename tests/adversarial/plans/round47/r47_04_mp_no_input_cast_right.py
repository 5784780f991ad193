"""Round 47 (R47-1 control): cast_forward_inputs=False: the block's input stays float32 (the
block casts it to its weight's dtype itself), so its bf16 branch is not taken: right."""
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
        return nn.functional.silu(self.up(x.to(self.up.weight.dtype)))


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
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, cast_forward_inputs=False)
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
