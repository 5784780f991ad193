"""47b: param-less root with output_dtype=float32; a user forward hook registered after
fully_shard runs after FSDP2's output cast, sees a non-bf16 output and doubles it: wrong."""
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



def _hook(m, args, out):
    return out * 2 if out.dtype != BF else out


def parallelize(model, mesh):
    mp = MixedPrecisionPolicy(param_dtype=BF)
    fully_shard(model.up, mesh=mesh["dp"], mp_policy=mp)
    fully_shard(model.down, mesh=mesh["dp"], mp_policy=mp)
    fully_shard(model, mesh=mesh["dp"], mp_policy=MixedPrecisionPolicy(
        param_dtype=BF, output_dtype=torch.get_default_dtype()))
    model.register_forward_hook(_hook)
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x).float() - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
