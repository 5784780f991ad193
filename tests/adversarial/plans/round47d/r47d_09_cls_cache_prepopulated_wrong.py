"""Idea (round 47d): parallelize puts its own class into torch's cls_to_fsdp_cls for nn.Linear before fully_shard(model.w2): torch 2.13 uses the cached class (w2 becomes Mine, doubling its output): wrong for real; the stand-in replaces an entry it did not make (`made not in _MADE`)."""
MESH = {"dp": 2}
import copy
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


SEEN = []


def _build(s):
    m = MLP(s["hidden"], s["ffn"])
    pass
    return m


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_model(s):
    return _build(s)


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard, FSDPModule
    from torch.distributed.fsdp._fully_shard._fully_shard import get_cls_to_fsdp_cls

    class Mine(FSDPModule, nn.Linear):
        def forward(self, x):
            return 2 * nn.Linear.forward(self, x)

    get_cls_to_fsdp_cls()[nn.Linear] = Mine
    fully_shard(model.w2, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
