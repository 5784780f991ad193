"""Idea (round 47c): a user module class with __hash__ constant and __eq__ true while a flag is set (only around fully_shard(model.w2)): the stand-in's WeakKeyDictionary module -> methods (fsdp_methods._UNIT_METHODS) then merges w2's methods into w1's entry, so model.w1.set_gradient_divide_factor(1.0) sets w2's factor (torch's state lives in w1.__dict__: w1's). Halving w2's gradients (parallel only): right in the stand-in, wrong for real (w1 doubled, w2 halved). Measured: torch raises AssertionError ("Inserting Lin(...) more than once") in fully_shard(model.w2) on every rank; EQUIVALENT at ae169d5 (R47c-5)."""
MESH = {"dp": 2}
import torch
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}
SAME = [False]


class Lin(nn.Linear):
    def __hash__(self):
        return 0

    def __eq__(self, other):
        return self is other or (SAME[0] and isinstance(other, Lin))


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w0 = nn.Linear(h, h, bias=False)
        self.w1 = Lin(h, f, bias=False)
        self.w2 = Lin(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(torch.tanh(self.w0(x)))))


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
    fully_shard(model.w1, mesh=mesh["dp"])
    SAME[0] = True
    try:
        fully_shard(model.w2, mesh=mesh["dp"])
    finally:
        SAME[0] = False
    fully_shard(model, mesh=mesh["dp"])
    model.w1.set_gradient_divide_factor(1.0)
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    if mesh is not None:
        with torch.no_grad():
            model.w2.weight.grad.mul_(0.5)
    optimizer.step()
    optimizer.zero_grad()
    return loss
