"""Idea (round 48d): a forward pre-hook on w1 does mod.weight.requires_grad_(False) while the optimizer has no state (the first step): serial freezes w1 for good; FSDP2 freezes only its unsharded leaf, and the next unshard copies requires_grad from the sharded parameter (True), so real w1 trains from step 2: wrong plan (if the stand-in does not compare requires_grad of the sharded parameter)."""
MESH = {"dp": 2}
import torch
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w0 = nn.Linear(h, h, bias=False)
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(torch.tanh(self.w0(x)))))


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    OPT.append(opt)
    return opt


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    fully_shard(model.w1, mesh=mesh["dp"])
    fully_shard(model.w2, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model

OPT = []


def _hook(mod, args):
    if not OPT[-1].state:
        mod.weight.requires_grad_(False)


def build_model(s):
    m = MLP(s["hidden"], s["ffn"])
    m.w1.register_forward_pre_hook(_hook)
    return m


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
