"""Round 36a (dp 2, wrong): R36a-2 through another class attribute of dist.Backend: parallelize
sets dist.Backend.GLOO = "cpu:fake" around new_group(ranks, backend="gloo") and puts it back
(not one of the registries _backend_registry reads). The capture drops backend="gloo" and makes
the group on the world's fake backend ("fake" != "cpu:fake": torch's own branches are unchanged
there); the real run's Backend("gloo") is getattr(Backend, "GLOO") = "cpu:fake", a device map
that BackendConfig reads as {cpu: "fake"} (plain "FAKE" fails torch's backend_type_map check),
and the dp group is a FakeProcessGroup (fake_pg imported by the train file): its all_reduce does
nothing.

Truth (torch4_truth.py FILE 1, gloo): w1 0.0067, w2 0.010 after step 1 (wrong; with
Backend.GLOO = "FAKE" the real run fails: "Unknown backend type FAKE").
Verdict at a88d2d1: EQUIVALENT (4 goals, 59 s): false accept R36a-2.
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
    dist.Backend.GLOO = "cpu:fake"
    try:
        _G["dp_gloo"] = dist.new_group(ranks=ranks, backend="gloo")
    finally:
        dist.Backend.GLOO = "gloo"
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
