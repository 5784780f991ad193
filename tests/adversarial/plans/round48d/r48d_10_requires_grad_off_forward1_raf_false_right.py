"""Idea (round 48d): r48d_07 with fully_shard(w1, reshard_after_forward=False): forward 2 does not re-gather w1 (FSDPParamGroup.unshard returns when unsharded, no to_unsharded), so the leaf frozen in forward 1 stays frozen as serial w1 does: right plan; does the stand-in copy requires_grad at the reuse?"""
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
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    fully_shard(model.w1, mesh=mesh["dp"], reshard_after_forward=False)
    fully_shard(model.w2, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model

def _hook(mod, args):
    if getattr(mod, "freeze", False):
        mod.weight.requires_grad_(False)


def build_model(s):
    m = MLP(s["hidden"], s["ffn"])
    m.w1.register_forward_pre_hook(_hook)
    return m


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    model.w1.freeze = True
    loss1 = ((model(x) - y) ** 2).mean()
    model.w1.freeze = False
    loss2 = ((model(x) - y) ** 2).mean()
    (loss1 + loss2).backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss2
