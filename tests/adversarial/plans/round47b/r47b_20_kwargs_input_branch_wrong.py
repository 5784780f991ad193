"""47b: a unit called with a keyword tensor (scale=) that FSDP2 casts to bf16; its forward doubles when the keyword is bf16: wrong."""
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



class Block(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.lin = nn.Linear(h, f)

    def forward(self, x, *, scale):
        y = self.lin(x) * scale
        return y * 2 if scale.dtype == BF else y


class M(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.up = Block(h, f)
        self.down = nn.Linear(f, h)
        self.register_buffer("s", torch.ones(f))

    def forward(self, x):
        return self.down(self.up(x, scale=self.s).to(self.down.weight.dtype))


def build_model(s):
    return M(s["hidden"], s["ffn"])


def parallelize(model, mesh):
    fully_shard(model.up, mesh=mesh["dp"], mp_policy=MixedPrecisionPolicy(param_dtype=BF))
    fully_shard(model, mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x).float() - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
