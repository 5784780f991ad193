"""Round 36a (dp 2, wrong): a plain backend="gloo" that torch resolves to "fake" in the real
run, without touching the registries _backend_registry reads: parallelize replaces
dist.Backend.__new__ (a class attribute: "gloo" -> "fake", anything else as torch's) around the
new_group call and puts it back. The capture drops backend="gloo" (_builtin_backend) and makes
the group on the world's fake backend, so the replaced __new__ only sees the world's "fake" and
nothing is recorded; the real run's group is a FakeProcessGroup (torch's fake_pg imported by the
train file, a no-op in the capture) whose all_reduce does nothing.

Truth (torch4_truth.py FILE 1, gloo): w1 0.0067, w2 0.010 after step 1 (wrong).
Verdict at a88d2d1: EQUIVALENT (4 goals, 94 s, loaded): false accept R36a-2.
"""

import torch
import torch.distributed as dist
from torch import nn
import torch.testing._internal.distributed.fake_pg  # noqa: F401 -- registers "fake"

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}
_G = {}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)))


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def make_batch(s):
    return {"x": torch.zeros(s["batch"], s["hidden"]), "y": torch.zeros(s["batch"], s["hidden"])}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    ranks = list(range(dist.get_world_size()))
    _G["dp"] = dist.new_group(ranks=ranks)
    # Megatron's parallel_state: a gloo duplicate of the dp group (for CPU-side collectives)
    new = vars(dist.Backend)["__new__"]

    def lookup(cls, name):
        return "fake" if name == "gloo" else new.__func__(cls, name)

    dist.Backend.__new__ = staticmethod(lookup)
    try:
        _G["dp_gloo"] = dist.new_group(ranks=ranks, backend="gloo")
    finally:
        dist.Backend.__new__ = new
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        g = _G["dp_gloo"]
        for p in model.parameters():
            dist.all_reduce(p.grad, group=g)
            p.grad.div_(dist.get_world_size(group=g))
    optimizer.step()
    optimizer.zero_grad()
    return loss
