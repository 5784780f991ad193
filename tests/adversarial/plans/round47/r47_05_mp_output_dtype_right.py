"""Round 47 (R47-1 control): the block's output_dtype is float32, so the parent's bf16 branch
is not taken for real: right (a stand-in without output_dtype would double)."""
MESH = {"dp": 2}
import torch
from torch import nn
from torch.distributed.fsdp import MixedPrecisionPolicy

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.up = nn.Linear(h, f)
        self.down = nn.Linear(f, h)

    def forward(self, x):
        h = self.up(x)
        if h.dtype == torch.bfloat16:
            h = h * 2
        return self.down(nn.functional.silu(h.to(self.down.weight.dtype)))


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
    fully_shard(model.up, mesh=mesh["dp"], mp_policy=MixedPrecisionPolicy(
        param_dtype=torch.bfloat16, output_dtype=torch.float32))
    fully_shard(model, mesh=mesh["dp"], mp_policy=MixedPrecisionPolicy(
        param_dtype=torch.bfloat16))
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x).float() - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
