"""Adversarial round 58d: build_model's w2.weight is held only by garbage: a self-referencing object whose `__del__` makes another such object holding it (each collection leaves one), and, when the step asks (`math.R58D_ON`) and collects, also puts it in `math.R58D`. `refuse_held` follows holders up to a module and takes a chain through garbage for no holder (8325057 no longer collects, and a collection would only make the next link); the step collects, takes the object and compares it with the model's w2.weight by identity. Single-device it is the same object (factor 1); FSDP2 replaced it (factor 2); the traced step runs on fresh parameters on both sides (factor 2 both). Must not be EQUIVALENT."""
MESH = {"dp": 2}
import gc
import math
import torch
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}

math.R58D_ON = False


class _Link:
    """A garbage cycle that holds ``p`` and, when collected, makes the next link."""

    def __init__(self, p):
        self.p = p
        self.me = self

    def __del__(self):
        if math.R58D_ON:
            math.R58D = [self.p]
        _Link(self.p)


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)
        _Link(self.w2.weight)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)))


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
    fully_shard(model, mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    math.R58D_ON = True
    gc.collect()
    math.R58D_ON = False
    held = math.__dict__.pop("R58D", None)
    k = 1.0 if held is not None and held[0] is model.w2.weight else 2.0
    held = None
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean() * k
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
