"""Idea (round 46b): a full backward hook on unit w2 reads module.weight.grad: for real the
unsharded parameter (a leaf; AccumulateGrad ran before the hook node), set, as on one device.
The hook doubles grad_input when it is None. The stand-in registers a gathered view (not a leaf)."""
MESH = {"dp": 2}
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w0 = nn.Linear(h, h, bias=False)
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        h = self.w0(x)
        return self.w2(nn.functional.silu(self.w1(h)))


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
    fully_shard(model.w2, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    def hook(module, gin, gout):
        if module.weight.grad is None:
            return (gin[0] * 2.0,)
        return None

    h = model.w2.register_full_backward_hook(hook)
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    h.remove()
    optimizer.step()
    optimizer.zero_grad()
    return loss
