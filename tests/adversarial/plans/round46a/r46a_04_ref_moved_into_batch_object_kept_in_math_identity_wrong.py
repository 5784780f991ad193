"""Idea (round 46a): refuse_held stops its upward search at whatever a running frame holds (the capture's locals), and the batch make_batch returns is one of them. build_model leaves w2.weight in math.PENDING46; make_batch moves it into an attribute of its batch (a dict subclass) and keeps that batch in math. The chain w2.weight -> batch.__dict__ -> batch stops at the batch (a running frame's local), so math's globals are never reached; the fingerprint does not read math. Single-device the same object (k = 1); FSDP2 replaced it (k = 2)."""
MESH = {"dp": 2}
import torch
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)
        import math
        math.PENDING46 = [self.w2.weight]

    def forward(self, x):
        import math
        ref = math.BATCH46.ref
        k = 1.0 if self.w2.weight is ref else 2.0
        return self.w2(nn.functional.silu(self.w1(x))) * k


class Batch(dict):
    pass


def make_batch(s):
    import math
    g = torch.Generator().manual_seed(0)
    b = Batch(x=torch.randn(s["batch"], s["hidden"], generator=g),
              y=torch.randn(s["batch"], s["hidden"], generator=g))
    pending = getattr(math, "PENDING46", None)
    if pending:
        b.ref = pending.pop()
        math.BATCH46 = b
    return b


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    fully_shard(model, mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
