"""Round 36a (dp 2, wrong): a backend= string that passes _builtin_backend but means "fake" to
torch. A str subclass whose value is "gloo" and whose upper() says "FAKE": the capture's check
reads str.lower(str.__str__(x)) == "gloo" and drops the argument (the group is made on the fake
world's backend, taken as dp); the real run's torch calls Backend(x) -> getattr(Backend,
x.upper()) = "fake" and makes the dp group a FakeProcessGroup (importing torch's fake_pg
registers its creator; in the capture it is already registered before the registry snapshot, so
the import changes nothing there). Its all_reduce is a no-op: each rank keeps half its own
gradient.

Truth (torch4_truth.py FILE 1, gloo): w1 0.0067, w2 0.010 after step 1 (wrong).
Verdict at a88d2d1: EQUIVALENT (4 goals, 68 s): false accept R36a-1.
"""

import torch
import torch.distributed as dist
from torch import nn
import torch.testing._internal.distributed.fake_pg  # noqa: F401 -- registers "fake"


class _Name(str):
    """"gloo" to whoever reads the string; "FAKE" to dist.Backend (its upper())."""

    def upper(self):
        return "FAKE"


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
    _G["dp_gloo"] = dist.new_group(ranks=ranks, backend=_Name("gloo"))
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
