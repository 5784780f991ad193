"""47b: a full backward hook on the bf16 unit model.up doubles grad_input when grad_output is
bf16 (no output_dtype: the output stays bf16, so its gradient is bf16): wrong."""
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


def _bw(m, gi, go):
    return (gi[0] * 2,) if go[0].dtype == BF else None


class Wrap(nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        self.pre = nn.Linear(6, 6)

    def forward(self, x):
        return self.inner.down(nn.functional.silu(self.inner.up(self.pre(x)).to(self.pre.weight.dtype)))


def build_model(s):
    return Wrap(MLP(s["hidden"], s["ffn"]))


def parallelize(model, mesh):
    fully_shard(model.inner.up, mesh=mesh["dp"], mp_policy=MixedPrecisionPolicy(param_dtype=BF))
    model.inner.up.register_full_backward_hook(_bw)
    fully_shard(model, mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x).float() - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
